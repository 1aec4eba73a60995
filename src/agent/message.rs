//! What a user says: the text and the images of one message, for a run's input or for a
//! run in progress (`RunControl::send`).

use crate::wire::request::ImageInput;

#[derive(Debug, Clone, Default)]
pub struct UserMessage {
    pub text: String,
    pub images: Vec<ImageInput>,
}
