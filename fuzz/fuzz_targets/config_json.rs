//! Fuzzes the config schema from JSON, as Python passes its dicts: arbitrary text through
//! `Config::from_json` (parsing and validation), and every config that parses through what the
//! front ends and both engines do with it before running (`config_check`). Errors are
//! expected; any panic is a bug.
#![no_main]

mod config_check;

use libfuzzer_sys::fuzz_target;
use pathtwin_core::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Some(cfg) = config_check::text(data).and_then(|t| Config::from_json(t).ok()) {
        config_check::exercise(cfg);
    }
});
