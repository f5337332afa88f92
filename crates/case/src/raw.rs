//! Stage one: the case file as serde reads it. Nothing here is checked but the TOML
//! shapes; every meaning is checked in `validate`.

use serde::Deserialize;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCase {
    pub description: Option<String>,
    pub arch: Option<Vec<String>>,
    pub whole_run: Option<bool>,
    pub kind: Option<String>,
    pub programs: Option<Vec<toml::Value>>,
    pub smp: Option<toml::Value>,
    pub keep_smp: Option<bool>,
    pub timeout_secs_smp: Option<f64>,
    pub memory_mib: Option<i64>,
    pub timeout_secs: Option<f64>,
    pub icount: Option<String>,
    pub qemu_seed: Option<i64>,
    pub rtc_base: Option<toml::Value>,
    pub repeat_exactly: Option<bool>,
    pub kernel_features: Option<Vec<String>>,
    pub debug_assertions: Option<bool>,
    pub expect: Option<Vec<String>>,
    pub forbid: Option<Vec<String>>,
    pub poweroff: Option<bool>,
    pub poweroff_status: Option<i64>,
    pub input: Option<Vec<RawInput>>,
    pub must_fail: Option<String>,
    pub firmware: Option<String>,
    pub guest: Option<RawGuest>,

    // host-tests
    pub workspace: Option<String>,
    pub features: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub fanout: Option<String>,
    pub values: Option<String>,
    pub env: Option<String>,
    pub test: Option<String>,
    pub tests: Option<Vec<String>>,
    pub filter: Option<String>,
    pub skip: Option<Vec<String>>,
    pub vars: Option<std::collections::BTreeMap<String, String>>,
    pub cores: Option<i64>,
    pub late: Option<Vec<String>>,
    // build
    pub package: Option<String>,
    pub bin: Option<String>,
    pub profile: Option<String>,
    pub forbid_in_binary: Option<Vec<String>>,
    // scripts
    pub build: Option<Vec<String>>,
    pub scripts: Option<Vec<String>>,
    // gate
    pub gate: Option<String>,
    pub tree: Option<String>,
    pub config: Option<String>,

    // Fields of features the bench will bring later. They are read so that a case using
    // one is refused as "not supported yet" rather than as a misspelling.
    pub launch: Option<toml::Value>,
    pub post_check: Option<toml::Value>,
    pub memory: Option<toml::Value>,
    pub expect_after: Option<toml::Value>,
    pub disk: Option<toml::Value>,
    pub net: Option<toml::Value>,
    pub session: Option<toml::Value>,
    pub late_cores: Option<toml::Value>,
    pub grant: Option<toml::Value>,

    // the reference guest, hostile inputs, device-tree edits, distinctness
    pub reporter: Option<String>,
    pub allow_panic: Option<bool>,
    pub tamper_bundle: Option<bool>,
    pub sign_bare_archive: Option<bool>,
    pub short_initrd: Option<i64>,
    pub device_tree: Option<Vec<toml::Table>>,
    pub distinct_across_boots: Option<Vec<String>>,
    pub distinct: Option<Vec<String>>,
    pub file: Option<Vec<toml::Table>>,
}

impl RawCase {
    /// The later-feature fields this case sets, by name.
    pub fn later_fields(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        let fields: [(&'static str, bool); 9] = [
            ("launch", self.launch.is_some()),
            ("post_check", self.post_check.is_some()),
            ("memory", self.memory.is_some()),
            ("expect_after", self.expect_after.is_some()),
            ("disk", self.disk.is_some()),
            ("net", self.net.is_some()),
            ("session", self.session.is_some()),
            ("late_cores", self.late_cores.is_some()),
            ("grant", self.grant.is_some()),
        ];
        for (name, set) in fields {
            if set {
                names.push(name);
            }
        }
        names
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawInput {
    pub after: String,
    pub send: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawGuest {
    pub kernel: Option<String>,
    pub recipe: Option<String>,
    pub initrd: Option<String>,
    pub append: Option<String>,
    pub firmware: Option<String>,
    pub machine: Option<String>,
    pub qemu_args: Option<Vec<String>>,
}
