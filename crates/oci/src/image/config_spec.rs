//! [`ConfigSpec`]: the image config a profile states (`config:` — entrypoint, cmd, env, workdir,
//! user, labels), as plain data. The profile's own deserializer fills it (with the file, line
//! and column of any error); `build_image` turns it into the OCI config. Must never read a file
//! or know the profile's syntax.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `config`: the OCI image config.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}
