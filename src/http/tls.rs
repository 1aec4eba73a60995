//! Serving TLS as HolmesGPT's server does (uvicorn's `ssl_*` options): a certificate chain
//! and key from PEM files (`HOLMES_SSL_CERTFILE`, `HOLMES_SSL_KEYFILE`), a key that may be
//! encrypted (`HOLMES_SSL_KEYFILE_PASSWORD`), and client certificates (`HOLMES_SSL_CA_CERTS`).
//!
//! With a client CA, a client certificate is *required*: HolmesGPT passes `ssl_ca_certs`
//! together with `ssl_cert_reqs=CERT_REQUIRED` (its chart switches the probes to TCP checks
//! for that reason), so a client without one is refused during the handshake.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::server::WebPkiClientVerifier;

use crate::config::ServerSettings;

/// The acceptor `server`'s TLS keys describe, `None` when TLS is not configured.
pub fn acceptor(server: &ServerSettings) -> Result<Option<tokio_rustls::TlsAcceptor>, String> {
    let (Some(cert), Some(key)) = (&server.tls_cert_file, &server.tls_key_file) else {
        return Ok(None);
    };
    crate::runtime::install_crypto_provider();
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read TLS certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", cert.display()));
    }
    let password = server.tls_key_password.as_deref().filter(|p| !p.is_empty());
    let key = private_key(key, password)?;
    let builder = tokio_rustls::rustls::ServerConfig::builder();
    let builder = match &server.tls_client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca)?),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("invalid TLS certificate or key: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}

/// Clients must present a certificate issued by one of the CAs in `ca`.
fn client_verifier(
    ca: &Path,
) -> Result<Arc<dyn tokio_rustls::rustls::server::danger::ClientCertVerifier>, String> {
    let what = || format!("client CA file {} (HOLMES_SSL_CA_CERTS)", ca.display());
    let cas = CertificateDer::pem_file_iter(ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the {}: {e}", what()))?;
    let mut roots = RootCertStore::empty();
    for cert in cas {
        roots
            .add(cert)
            .map_err(|e| format!("a certificate in the {} is not a CA: {e}", what()))?;
    }
    if roots.is_empty() {
        return Err(format!("no certificate in the {}", what()));
    }
    WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| format!("the {} cannot verify clients: {e}", what()))
}

/// The server's key: plain PEM (PKCS#8, PKCS#1 or SEC1), or PKCS#8 encrypted with
/// `password`. OpenSSL's older encrypted PEM (`Proc-Type: 4,ENCRYPTED`) is refused with the
/// command that converts it.
fn private_key(file: &Path, password: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let text =
        std::fs::read(file).map_err(|e| format!("cannot read TLS key {}: {e}", file.display()))?;
    let encrypted_pkcs8 = contains(&text, b"-----BEGIN ENCRYPTED PRIVATE KEY-----");
    if contains(&text, b"Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "TLS key {} is encrypted in OpenSSL's legacy PEM format, which triage does not \
             read: convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc \
             -in {0} -out key.p8` (it asks for the old password, then the new one) and point \
             HOLMES_SSL_KEYFILE at the result",
            file.display()
        ));
    }
    if !encrypted_pkcs8 {
        if password.is_some() {
            tracing::info!(
                key = %file.display(),
                "HOLMES_SSL_KEYFILE_PASSWORD is set but the TLS key is not encrypted"
            );
        }
        return PrivateKeyDer::from_pem_slice(&text)
            .map_err(|e| format!("cannot read TLS key {}: {e}", file.display()));
    }
    let Some(password) = password else {
        return Err(format!(
            "TLS key {} is encrypted: set HOLMES_SSL_KEYFILE_PASSWORD (server.tls_key_password)",
            file.display()
        ));
    };
    let (label, der) = pkcs8::der::pem::decode_vec(&text)
        .map_err(|e| format!("cannot read TLS key {}: {e}", file.display()))?;
    if label != "ENCRYPTED PRIVATE KEY" {
        return Err(format!(
            "TLS key {}: the encrypted key must be the file's only PEM section",
            file.display()
        ));
    }
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| format!("TLS key {} is not encrypted PKCS#8: {e}", file.display()))?;
    // The error says nothing of the password itself.
    let key = info.decrypt(password).map_err(|_| {
        format!(
            "cannot decrypt TLS key {}: wrong HOLMES_SSL_KEYFILE_PASSWORD, or a cipher other \
             than PBES2 (PBKDF2 or scrypt with AES-CBC)",
            file.display()
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        key.as_bytes().to_vec(),
    )))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openssl(args: &[&str]) {
        let status = std::process::Command::new("openssl")
            .args(args)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl is installed");
        assert!(status.success(), "openssl {args:?}");
    }

    /// Each form of key a HolmesGPT deployment may mount: encrypted PKCS#8 opens with its
    /// password only; the legacy encrypted PEM is refused with the conversion command.
    #[test]
    fn encrypted_keys_need_their_password_and_legacy_ones_say_how_to_convert() {
        let dir = std::env::temp_dir().join(format!("triage-tls-key-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = |name: &str| dir.join(name).display().to_string();
        openssl(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &path("plain.pem"),
        ]);
        openssl(&[
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-in",
            &path("plain.pem"),
            "-out",
            &path("enc.pem"),
            "-passout",
            "pass:s3cret",
        ]);
        openssl(&[
            "genrsa",
            "-traditional",
            "-aes256",
            "-passout",
            "pass:s3cret",
            "-out",
            &path("legacy.pem"),
            "2048",
        ]);
        let key = |name: &str, password: Option<&str>| private_key(&dir.join(name), password);

        assert!(key("plain.pem", None).is_ok());
        assert!(key("plain.pem", Some("unused")).is_ok());
        let opened = key("enc.pem", Some("s3cret")).expect("the right password opens it");
        assert!(matches!(opened, PrivateKeyDer::Pkcs8(_)));
        let err = key("enc.pem", None).unwrap_err();
        assert!(err.contains("HOLMES_SSL_KEYFILE_PASSWORD"), "{err}");
        let err = key("enc.pem", Some("wrong")).unwrap_err();
        assert!(
            err.contains("cannot decrypt") && !err.contains("wrong\""),
            "{err}"
        );
        let err = key("legacy.pem", Some("s3cret")).unwrap_err();
        assert!(
            err.contains("legacy") && err.contains("openssl pkcs8 -topk8"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
