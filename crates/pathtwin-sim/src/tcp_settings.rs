//! The simulator's policy on the per-controller tables (`[tcp.vegas]`, `[tcp.cubic]`,
//! `[tcp.bic]`, `[tcp.monaco]`): a table that no flow's controller reads is an error. Reading
//! the settings into an endpoint config is `pathtwin_tcp`'s (`TcpConfig::from_settings`),
//! the schema `pathtwin_core::config`'s.

use pathtwin_core::config::{ConfigError, TcpSettings};

/// Per-controller tables that no flow uses are a mistake (a typo in `cc`, or a table left
/// from another experiment): the simulator would silently ignore them. `used` are the
/// controllers' config names (`CcAlgorithm::config_name`).
pub fn check_tables_used(tables: &TcpSettings, used: &[&str], key: &str) -> Result<(), ConfigError> {
    for (name, present) in tables.controller_tables() {
        if present && !used.contains(&name) {
            return Err(ConfigError::invalid(format!("{key}.{name}"), format!("no flow runs cc = {name:?}, so these parameters would be ignored")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::config::{BicSettings, CubicSettings};

    #[test]
    fn a_table_no_flow_reads_is_named() {
        let s = TcpSettings { cubic: Some(CubicSettings::default()), bic: Some(BicSettings::default()), ..Default::default() };
        assert_eq!(check_tables_used(&s, &["cubic", "bic"], "tcp"), Ok(()));
        let e = check_tables_used(&s, &["cubic", "reno"], "flow[1].tcp").unwrap_err().to_string();
        assert_eq!(e, "flow[1].tcp.bic: no flow runs cc = \"bic\", so these parameters would be ignored");
    }
}
