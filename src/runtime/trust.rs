//! The trust every outbound HTTPS client shares: the system's roots plus the CA certificates
//! an operator adds (HolmesGPT's `CERTIFICATE`: a TLS-inspecting proxy's CA, an internal CA
//! of an LLM gateway, an MCP server or Prometheus). Every client triage opens to the outside
//! starts from [`ExtraRoots::client_builder`], so none can be left out.

use std::sync::Arc;

use base64::Engine;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// CA certificates trusted besides the system's; empty by default. Cheap to clone.
#[derive(Clone, Default)]
pub struct ExtraRoots(Arc<Roots>);

#[derive(Default)]
struct Roots {
    certificates: Vec<reqwest::Certificate>,
    /// The same, as PEM: for clients that are not reqwest (aws-config's STS and metadata).
    pem: Vec<u8>,
}

impl std::fmt::Debug for ExtraRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExtraRoots({} certificates)", self.0.certificates.len())
    }
}

impl ExtraRoots {
    /// `CERTIFICATE`'s form: base64 of one or more PEM certificates (as HolmesGPT's chart
    /// renders `certificate`). PEM text itself is taken too. The error says what is wrong,
    /// never the value.
    pub fn from_base64_pem(text: &str) -> Result<ExtraRoots, String> {
        let text = text.trim();
        let pem = if text.starts_with("-----BEGIN") {
            text.as_bytes().to_vec()
        } else {
            let compact: String = text.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|_| "is not base64 (encode the PEM file with `base64 -w0 ca.crt`)")?
        };
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("is not PEM certificates: {e}"))?;
        if certs.is_empty() {
            return Err("holds no `-----BEGIN CERTIFICATE-----` block".into());
        }
        let certificates = certs
            .iter()
            .map(|der| reqwest::Certificate::from_der(der))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("holds a certificate that cannot be used: {e}"))?;
        Ok(ExtraRoots(Arc::new(Roots { certificates, pem })))
    }

    pub fn is_empty(&self) -> bool {
        self.0.certificates.is_empty()
    }

    /// The certificates as PEM (empty when there are none).
    pub fn pem(&self) -> &[u8] {
        &self.0.pem
    }

    /// A client builder that trusts the system's roots and these.
    pub fn client_builder(&self) -> reqwest::ClientBuilder {
        super::install_crypto_provider();
        let builder = reqwest::Client::builder();
        if self.is_empty() {
            builder
        } else {
            builder.tls_certs_merge(self.0.certificates.iter().cloned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real CA certificate, made by openssl.
    fn ca_pem() -> String {
        let dir = std::env::temp_dir().join(format!("triage-trust-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=test-ca", "-keyout"])
            .arg(dir.join("ca.key"))
            .arg("-out")
            .arg(dir.join("ca.crt"))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl is installed");
        assert!(status.success());
        let pem = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        pem
    }

    #[test]
    fn certificate_is_base64_of_pem_and_errors_never_quote_it() {
        let pem = ca_pem();
        let engine = base64::engine::general_purpose::STANDARD;
        // Base64 as the chart renders it, wrapped as `base64` writes it, or the PEM itself.
        let wrapped: String = engine
            .encode(&pem)
            .as_bytes()
            .chunks(76)
            .map(|line| format!("{}\n", String::from_utf8_lossy(line)))
            .collect();
        for form in [engine.encode(&pem), wrapped, pem.clone()] {
            let roots = ExtraRoots::from_base64_pem(&form).expect("loads");
            assert_eq!(roots.0.certificates.len(), 1);
            assert!(roots.pem().starts_with(b"-----BEGIN CERTIFICATE-----"));
            roots
                .client_builder()
                .build()
                .expect("a client trusting it");
        }
        let err = ExtraRoots::from_base64_pem("not*base64 sk-SECRET").unwrap_err();
        assert!(
            err.contains("not base64") && !err.contains("sk-SECRET"),
            "{err}"
        );
        let err = ExtraRoots::from_base64_pem(&engine.encode("hello")).unwrap_err();
        assert!(err.contains("no `-----BEGIN CERTIFICATE-----`"), "{err}");
        assert!(ExtraRoots::default().is_empty());
    }
}
