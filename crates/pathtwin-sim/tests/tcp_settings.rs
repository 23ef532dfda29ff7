//! TCP settings the endpoints cannot run with, as a config gives them (met while writing the
//! config fuzz targets, whose `fuzz/fuzz_targets/config_check.rs` builds every config that
//! parses into a simulation). Each is a one-line error naming the flow and the setting;
//! before, the endpoint's debug assertion ("TcpConfig must be validated by the caller")
//! panicked.

use pathtwin_core::config::Config;
use pathtwin_sim::Simulation;

fn build(tcp: &str, flow_tcp: &str) -> Result<Simulation, String> {
    let text = format!(
        "hosts = [\"a\", \"b\"]\n[tcp]\n{tcp}\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"10ms\"\nabw = \"1mbit\"\n[[flow]]\nfrom = \"a\"\nto = \"b\"\ntcp = {{ {flow_tcp} }}\n"
    );
    Simulation::new(Config::from_toml(&text, "t.toml").map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

#[test]
fn settings_the_endpoint_refuses_are_errors_naming_the_flow_and_setting() {
    for (tcp, flow_tcp, expected) in [
        ("initial_window = 0", "", "flow[0]: tcp.initial_window = 0: must be at least 1 segment"),
        ("", "max_window = \"0B\"", "flow[0]: tcp.max_window = 0: must be at least 1 byte"),
        ("rcv_window = \"0B\"", "", "flow[0]: tcp.rcv_buffer = 0: must be at least 1 byte"),
        ("", "dupack_threshold = 0", "flow[0]: tcp.dupack_threshold = 0: must be at least 1"),
    ] {
        let e = build(tcp, flow_tcp).err().unwrap_or_else(|| panic!("{tcp} {flow_tcp}: accepted"));
        assert_eq!(e, expected);
    }
    let e = build("min_rto = \"0s\"", "").err().expect("a zero min_rto is refused");
    assert!(e.starts_with("flow[0]: tcp.min_rto = ") && !e.contains('\n'), "{e}");
    assert!(build("initial_window = 4", "dupack_threshold = 2").is_ok());
}
