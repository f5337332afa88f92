//! Stage one: the case file as serde reads it. Nothing here is checked but the TOML
//! shapes; every meaning is checked in `validate`.

use serde::Deserialize;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCase {
    // description and kind are read from the table before serde.
    pub arch: Option<Vec<String>>,
    pub whole_run: Option<bool>,
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

/// Fields of features the bench will bring later: a case using one is refused as "not
/// supported yet" (before serde reads the file), rather than as a misspelling.
pub const LATER_FIELDS: [&str; 9] =
    ["launch", "post_check", "memory", "expect_after", "disk", "net", "session", "late_cores", "grant"];

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
