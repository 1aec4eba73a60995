//! HTTPS for the stand-in: what kubectl's in-cluster configuration speaks. A test CA made with
//! the `openssl` command signs a certificate for 127.0.0.1 and localhost; the CA certificate is
//! what a pod finds as `ca.crt` beside its service-account token.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The test CA's certificate and the server's certificate and key, as PEM files.
pub(super) struct Pki {
    pub ca_cert: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("kube stand-in: run openssl (is it installed?)");
    assert!(
        out.status.success(),
        "kube stand-in: openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate it signed, valid for a day, written into `dir`.
pub(super) fn make_pki(dir: &Path) -> Pki {
    let p256 = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let ca = [
        &["req", "-x509", "-nodes", "-days", "1"][..],
        &p256,
        &[
            "-subj",
            "/CN=kube-standin-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
        &["-addext", "basicConstraints=critical,CA:TRUE"],
        &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
    ]
    .concat();
    openssl(&ca, dir);
    let request = [
        &["req", "-new", "-nodes"][..],
        &p256,
        &[
            "-subj",
            "/CN=kubernetes",
            "-keyout",
            "tls.key",
            "-out",
            "tls.csr",
        ],
    ]
    .concat();
    openssl(&request, dir);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n\
         extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )
    .expect("kube stand-in: write server.ext");
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "server.ext",
            "-out",
            "tls.crt",
        ],
        dir,
    );
    Pki {
        ca_cert: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    }
}

fn acceptor(pki: &Pki) -> tokio_rustls::TlsAcceptor {
    let certs = CertificateDer::pem_file_iter(&pki.cert)
        .expect("kube stand-in: read tls.crt")
        .collect::<Result<Vec<_>, _>>()
        .expect("kube stand-in: parse tls.crt");
    let key = PrivateKeyDer::from_pem_file(&pki.key).expect("kube stand-in: read tls.key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("kube stand-in: TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("kube stand-in: certificate and key");
    // kubectl (Go) asks for HTTP/2 first, as against a real API server.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Serves `app` over TLS on `listener`, one task per connection, until the task is aborted.
pub(super) fn serve(
    listener: tokio::net::TcpListener,
    pki: &Pki,
    app: Router,
) -> tokio::task::JoinHandle<()> {
    let acceptor = acceptor(pki);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
            });
        }
    })
}
