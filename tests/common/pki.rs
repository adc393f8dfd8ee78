//! A CA and certificates made by the tests, as a person's own CA or ACME would (rcgen).

use std::path::{Path, PathBuf};

/// A CA and leaves made here, as a person's own CA or ACME would.
pub struct Pki {
    pub dir: tempfile::TempDir,
    ca_key: rcgen::KeyPair,
    ca_params: rcgen::CertificateParams,
}

impl Pki {
    pub fn new() -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::default();
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "test CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = ca_params.self_signed(&ca_key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
        Self { dir, ca_key, ca_params }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A leaf for `names`, valid from `from` to `to` days from now, written as `name`.pem/.key.
    pub fn leaf(&self, name: &str, names: &[&str], from: i64, to: i64) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now + time::Duration::days(from);
        p.not_after = now + time::Duration::days(to);
        let issuer = rcgen::Issuer::new(self.ca_params.clone(), &self.ca_key);
        let cert = p.signed_by(&key, &issuer).unwrap();
        let (c, k) = (self.dir.path().join(format!("{name}.pem")), self.dir.path().join(format!("{name}.key")));
        write_private(&c, &cert.pem());
        write_private(&k, &key.serialize_pem());
        (c, k)
    }
}

pub fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

