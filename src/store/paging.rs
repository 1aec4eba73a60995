//! Page ids: a keyset cursor (the last item's sort key) in URL-safe base64, so clients treat
//! them as opaque and the next page is an index seek, not an OFFSET scan.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use uuid::Uuid;

use super::{SortOrder, StoreError};

fn encode(text: &str) -> String {
    URL_SAFE_NO_PAD.encode(text)
}

fn decode(page_id: &str) -> Result<String, StoreError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(page_id)
        .map_err(|_| StoreError::InvalidPageId)?;
    String::from_utf8(bytes).map_err(|_| StoreError::InvalidPageId)
}

/// Events: the last id returned, and the direction (a page id of one order is refused in
/// the other).
pub(crate) fn event_page(seq: i64, descending: bool) -> String {
    encode(&format!("e{}:{seq}", if descending { "d" } else { "a" }))
}

pub(crate) fn event_cursor(page_id: &str, descending: bool) -> Result<i64, StoreError> {
    let text = decode(page_id)?;
    let prefix = if descending { "ed:" } else { "ea:" };
    text.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or(StoreError::InvalidPageId)
}

fn sort_tag(sort: SortOrder) -> &'static str {
    match sort {
        SortOrder::CreatedAt => "ca",
        SortOrder::CreatedAtDesc => "cd",
        SortOrder::UpdatedAt => "ua",
        SortOrder::UpdatedAtDesc => "ud",
    }
}

/// Conversations: the last row's sort timestamp (µs) and id, for that sort order.
pub(crate) fn conversation_page(sort: SortOrder, micros: i64, id: Uuid) -> String {
    encode(&format!("c{}:{micros}:{id}", sort_tag(sort)))
}

pub(crate) fn conversation_cursor(
    page_id: &str,
    sort: SortOrder,
) -> Result<(i64, Uuid), StoreError> {
    let text = decode(page_id)?;
    let rest = text
        .strip_prefix('c')
        .and_then(|t| t.strip_prefix(sort_tag(sort)))
        .and_then(|t| t.strip_prefix(':'))
        .ok_or(StoreError::InvalidPageId)?;
    let (micros, id) = rest.split_once(':').ok_or(StoreError::InvalidPageId)?;
    Ok((
        micros.parse().map_err(|_| StoreError::InvalidPageId)?,
        id.parse().map_err(|_| StoreError::InvalidPageId)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ids_round_trip_and_are_bound_to_their_order() {
        let id = Uuid::new_v4();
        let page = conversation_page(SortOrder::UpdatedAt, 42, id);
        assert_eq!(
            conversation_cursor(&page, SortOrder::UpdatedAt).ok(),
            Some((42, id))
        );
        assert!(conversation_cursor(&page, SortOrder::CreatedAt).is_err());
        let page = event_page(7, true);
        assert_eq!(event_cursor(&page, true).ok(), Some(7));
        assert!(event_cursor(&page, false).is_err());
        assert!(event_cursor("not base64!", false).is_err());
    }
}
