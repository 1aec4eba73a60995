//! The process's runtime, below everything else: the heap allocator, the process's own memory,
//! the serving threads, buffer size hints and the trust outbound TLS clients share.

pub mod allocator;
pub mod memory;
pub mod shards;
pub mod size_hint;
pub mod trust;

/// Installs rustls' ring provider once (reqwest is built without a default provider so that
/// aws-lc stays out of the build). Every TLS client calls it before it is built.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
