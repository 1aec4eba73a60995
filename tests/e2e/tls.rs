//! TLS as HolmesGPT's chart configures it, with a private CA made by openssl for each test:
//! an encrypted server key opened with `HOLMES_SSL_KEYFILE_PASSWORD`, client certificates
//! required by `HOLMES_SSL_CA_CERTS`, and `CERTIFICATE` (base64 of a CA) trusted by outbound
//! clients: an HTTPS LLM signed by that CA is reachable only with it.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use fake_llm::{FakeLlm, Step};
use serde_json::json;
use triage::config::Settings;
use triage::startup::Application;

use crate::helpers::{free_port, spawn_with_settings, test_data_dir, wait_until_ready};

const PASSWORD: &str = "s3cret-key-password";

/// A CA, a server certificate for 127.0.0.1 and localhost (its key plain and encrypted as
/// PKCS#8), and a client certificate, all signed by the CA.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new() -> Pki {
        let dir = crate::helpers::scratch().join(format!("pki-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        pki.openssl(
            &["req", "-x509"],
            &ec,
            &[
                "-days",
                "1",
                "-subj",
                "/CN=triage-test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        );
        for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth")] {
            let csr = format!("{name}.csr");
            let key = format!("{name}.key");
            pki.openssl(
                &["req"],
                &ec,
                &[
                    "-subj",
                    &format!("/CN={name}"),
                    "-keyout",
                    &key,
                    "-out",
                    &csr,
                ],
            );
            let ext = pki.dir.join(format!("{name}.ext"));
            std::fs::write(
                &ext,
                format!("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n"),
            )
            .unwrap();
            pki.openssl(
                &[
                    "x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key",
                ],
                &["-CAcreateserial", "-days", "1"],
                &[
                    "-extfile",
                    &ext.display().to_string(),
                    "-out",
                    &format!("{name}.crt"),
                ],
            );
        }
        pki.openssl(
            &["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "server.key"],
            &["-out", "server-encrypted.key"],
            &["-passout", &format!("pass:{PASSWORD}")],
        );
        pki
    }

    fn openssl(&self, a: &[&str], b: &[&str], c: &[&str]) {
        let out = std::process::Command::new("openssl")
            .current_dir(&self.dir)
            .args(a)
            .args(b)
            .args(c)
            .output()
            .expect("openssl is installed");
        assert!(
            out.status.success(),
            "openssl {a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    /// A client that trusts this CA only, presenting the client certificate when asked to.
    fn client(&self, with_certificate: bool) -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = reqwest::Certificate::from_pem(&self.read("ca.crt")).unwrap();
        let mut builder = reqwest::Client::builder().no_proxy().tls_certs_only([ca]);
        if with_certificate {
            let mut pem = self.read("client.crt");
            pem.extend(self.read("client.key"));
            builder = builder.identity(reqwest::Identity::from_pem(&pem).unwrap());
        }
        builder.build().unwrap()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_settings(pki: &Pki, llm: &FakeLlm, extra: &str) -> String {
    format!(
        "[server]\nhost = \"127.0.0.1\"\nport = 0\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n{extra}\n\
         [toolsets.kubernetes]\nenabled = false\n[models.fake]\nmodel = \"openai/m\"\napi_base = \"{}\"\n",
        pki.path("server.crt").display(),
        pki.path("server-encrypted.key").display(),
        llm.base_url()
    )
}

#[tokio::test]
async fn an_encrypted_key_opens_with_its_password_and_client_certificates_are_required() {
    let pki = Pki::new();
    let llm = FakeLlm::start().await;
    // Without the password the server does not start, and says which variable it needs.
    let settings = Settings::from_toml(&tls_settings(&pki, &llm, "")).unwrap();
    let err = Application::build(settings)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("HOLMES_SSL_KEYFILE_PASSWORD"), "{err}");
    let wrong =
        Settings::from_toml(&tls_settings(&pki, &llm, "tls_key_password = \"nope\"")).unwrap();
    let err = Application::build(wrong)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("cannot decrypt") && !err.contains("nope"),
        "{err}"
    );

    let extra = format!(
        "tls_key_password = \"{PASSWORD}\"\ntls_client_ca_file = \"{}\"",
        pki.path("ca.crt").display()
    );
    let settings = Settings::from_toml(&tls_settings(&pki, &llm, &extra)).unwrap();
    let app = spawn_with_settings(settings, llm).await;
    let https = app.base.replacen("http://", "https://", 1);
    // No client certificate: the handshake is refused (uvicorn's CERT_REQUIRED).
    let refused = pki
        .client(false)
        .get(format!("{https}/healthz"))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let mtls = pki.client(true);
    let resp = mtls.get(format!("{https}/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    app.llm.push(Step::text("over mutual TLS"));
    let text = mtls
        .post(format!("{https}/api/chat"))
        .json(&json!({"ask": "q"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("over mutual TLS"), "{text}");
}

/// An HTTPS front for the fake LLM with the server certificate the private CA signed.
async fn https_llm(pki: &Pki, llm: &FakeLlm) -> String {
    format!("{}/v1", https_front(pki, &llm.origin()).await)
}

/// An HTTPS front, with the server certificate the private CA signed, for the plain HTTP
/// server at `origin`: its `https://` origin.
async fn https_front(pki: &Pki, origin: &str) -> String {
    use rustls_pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(pki.path("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(pki.path("server.key")).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let backend = origin.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    format!("https://127.0.0.1:{port}")
}

#[tokio::test]
async fn certificate_makes_outbound_clients_trust_a_private_ca() {
    let pki = Pki::new();
    let llm = FakeLlm::start().await;
    let api_base = https_llm(&pki, &llm).await;
    let settings = |extra: &str| {
        Settings::from_toml(&format!(
            "{extra}\n[server]\nhost = \"127.0.0.1\"\nport = 0\n[llm]\nretry_max_attempts = 1\n\
             [toolsets.kubernetes]\nenabled = false\n\
             [models.private]\nmodel = \"openai/m\"\napi_base = \"{api_base}\"\n"
        ))
        .unwrap()
    };
    // The system's roots alone do not know the CA: the call fails in the handshake.
    let untrusting = spawn_with_settings(settings(""), FakeLlm::start().await).await;
    untrusting.llm.push(Step::text("unreachable"));
    let events = untrusting.chat_sse(&json!({"ask": "q"})).await;
    let last = crate::helpers::last(&events);
    assert_eq!(last.name, "error", "{events:?}");
    assert!(llm.requests().is_empty(), "nothing reached the LLM");

    // CERTIFICATE as the chart renders it (base64 of the PEM), in a real `triage serve`.
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.read("ca.crt"));
    let port = free_port();
    let home = test_data_dir();
    std::fs::create_dir_all(&home).unwrap();
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    serve
        .env_clear()
        .arg("serve")
        .kill_on_drop(true)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOLMES_PORT", port.to_string())
        .env("MODEL", "openai/m")
        .env("API_BASE", &api_base)
        .env("API_KEY", "sk-test")
        .env("CERTIFICATE", &ca)
        .env("TRIAGE_TOOLSETS__KUBERNETES__ENABLED", "false");
    let _server = serve.spawn().expect("triage serve starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = crate::helpers::http_client();
    wait_until_ready(&client, &base).await;
    llm.push(Step::text("through the private CA"));
    let text = client
        .post(format!("{base}/api/chat"))
        .json(&json!({"ask": "q"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("through the private CA"), "{text}");
    assert_eq!(llm.requests().len(), 1);

    // The same in triage's own settings; a value that is not a certificate stops start-up
    // with the key's name and not the value.
    let trusting = spawn_with_settings(
        settings(&format!("ca_certificate = \"{ca}\"")),
        FakeLlm::start().await,
    )
    .await;
    llm.push(Step::text("again"));
    let events = trusting.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(
        crate::helpers::last(&events).name,
        "ai_answer_end",
        "{events:?}"
    );
    let err = Settings::from_toml("ca_certificate = \"sk-not-a-cert\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`ca_certificate` (CERTIFICATE)") && !err.contains("sk-not"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

/// A failed check's webhook receiver behind the private CA is reached with `ca_certificate`,
/// as every other outbound client is, and refused in the handshake without it.
#[tokio::test]
async fn check_notifications_trust_the_private_ca_too() {
    let pki = Pki::new();
    let fakes = crate::notification_fakes::Fakes::start().await;
    let receiver = format!("{}/hook/private", https_front(&pki, &fakes.base).await);
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.read("ca.crt"));
    for (extra, outcome) in [
        ("", "failed"),
        (format!("ca_certificate = \"{ca}\"\n").as_str(), "sent"),
    ] {
        let app = crate::helpers::spawn_app_with(extra).await;
        app.llm.push(Step::text(
            &json!({"rationale": "the queue is stuck", "passed": false}).to_string(),
        ));
        let answer: serde_json::Value = app
            .post_raw(
                "/api/checks/execute",
                json!({"query": "Is the queue draining?", "mode": "alert",
                    "destinations": [{"type": "webhook", "config": {"url": receiver}}]})
                .to_string(),
            )
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(answer["notifications"][0]["status"], outcome, "{answer}");
    }
    assert_eq!(
        fakes.to("/hook/private").len(),
        1,
        "only the trusting server got through"
    );
}
