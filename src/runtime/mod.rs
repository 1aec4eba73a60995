//! The process's runtime, below everything else: the heap allocator, the process's own memory,
//! the serving threads, buffer size hints, the trust outbound TLS clients share and
//! where a client-named destination (a notification, a push target) may not be.

pub mod allocator;
pub mod destinations;
pub mod memory;
pub mod shards;
pub mod size_hint;
pub mod trust;

/// Installs rustls' ring provider once (reqwest is built without a default provider so that
/// aws-lc stays out of the build). Every TLS client calls it before it is built.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
