"""Type stub of ``pathtwin._native``, the PyO3 extension (crate ``pathtwin-py``): every class
and function it exports, as ``crates/pathtwin-py/src/{sim,emu,trace}.rs`` define them.

Configs cross as TOML text, or as JSON text made from a dict; a config the user must fix
raises ``ConfigError`` (simulator, schema, units) or ``pathtwin.errors.PathtwinError``
(emulator, trace analysis), each with a one-line message. Paths may be ``str`` or
``os.PathLike``. The ``TypedDict``s here exist for type checking only.
"""

from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any, Self, TypedDict, final

__all__ = ["__version__", "ConfigError", "DEFAULT_PATH_CAPACITY_BPS", "Simulation", "validate_config", "config_toml", "queue_bounds", "fit_queues",
           "parse_quantity", "parse_per_direction", "monkey_pipe_queues", "simulator_congestion_controls",
           "table_columns", "EmuRun", "emu_cleanup_stale", "emu_live_runs", "trace_analyze", "trace_analyze_files",
           "trace_diagnose"]

__version__: str
#: The capacity of a path-mode bottleneck that gives none (topology::DEFAULT_PATH_CAPACITY).
DEFAULT_PATH_CAPACITY_BPS: int

_Path = str | PathLike[str]
#: Called with the bytes read so far, about every megabyte, with the GIL held.
_Progress = Callable[[int], object] | None

# -- sim.rs --------------------------------------------------------------------------------

class ConfigError(ValueError):
    """A config, argument or input the user must fix; the message is one line."""

class _RunMeta(TypedDict):
    simulated_s: float
    events: int
    complete: bool

class _WrittenResults(TypedDict):
    tables: list[str]
    failed: list[str]
    meta: _RunMeta

@final
class Simulation:
    """A simulation of one config; ``advance`` runs it in chunks with the GIL released."""

    def __new__(cls, text: str, format: str = "toml", origin: str = "") -> Self: ...
    def advance(self, until_s: float) -> bool:
        """Runs events up to ``until_s`` simulated seconds; True when the run is complete."""
    def capture_to(self, dir: _Path) -> list[str]:
        """Writes ``<dir>/<host>.pcap`` for the hosts in ``[run] pcap``; returns the paths."""
    def flush_captures(self) -> None: ...
    @property
    def now_s(self) -> float: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def finished(self) -> bool: ...
    @property
    def warnings(self) -> list[str]: ...
    def resolved_json(self) -> str:
        """JSON ``{"config", "paths", "elements"}``: the config with defaults filled, each path
        direction's resolved capacity, ABW, delay and queue, and the elements."""
    def results(self, only: Sequence[str] | None = None) -> dict[str, Any]:
        """``{table: {column: list}}`` for ``flows``, ``flow_series``, ``queues``,
        ``queue_series``, ``markers`` and ``pipes`` (or just ``only``), plus ``meta``
        (a ``_RunMeta``)."""
    def write_results(self, dir: _Path) -> _WrittenResults:
        """Writes the tables as ``<dir>/<table>.parquet`` (``pipes`` only with pipes), each
        whole or not at all; ``failed`` holds the one-line errors of those not written."""

# -- model.rs ------------------------------------------------------------------------------

def validate_config(text: str, format: str = "toml", origin: str = "") -> str:
    """Validates config text; returns the parsed config as JSON (defaults filled)."""

def config_toml(text: str, format: str = "toml", origin: str = "") -> str:
    """Validates config text; returns it as TOML written by the schema's serialiser
    (defaults filled), which parses back to the same config."""

class _QueueBounds(TypedDict):
    lower: list[int]
    upper_total: float
    forward: int
    queue: list[int]
    feasible: bool
    capped: bool

def queue_bounds(abw_forward_bps: int, abw_reverse_bps: int, rtt_s: float, wmax_bytes: int, capacity_bps: int,
                 flows: int = 1, max_queue_bytes: int = ...) -> _QueueBounds:
    """NSDI'09 Eq. 2 and Eq. 4 for one path, with the queue sizes the model would pick
    (``max_queue_bytes``: the cap, by default the model's 1 MB)."""

class _FittedQueues(TypedDict):
    lower: list[int]
    upper_total: float
    forward: int
    queue: list[int] | None
    raised: list[bool]
    lowered: bool
    derived: list[bool]

def fit_queues(abw_bps: tuple[int, int], capacity_bps: tuple[int, int], rtt_s: float, wmax_bytes: int | None,
               measured_bytes: tuple[int | None, int | None], flows: int = 1, max_queue_bytes: int = ...) -> _FittedQueues:
    """Measured queue sizes (bytes per direction, ``None`` where not measured) fitted to
    NSDI'09 Eq. 2 and Eq. 4: ``queue`` to write (``None`` when no queue meets both),
    directions ``raised`` to Eq. 2, whether the excess over Eq. 2 was ``lowered`` to fit
    Eq. 4, and directions whose queue was ``derived`` for want of a measurement.
    ``wmax_bytes`` ``None``: the model's default w_max."""

def parse_quantity(kind: str, text: str) -> float:
    """Parses ``text`` as a ``kind`` ("rate", "size", "time", "fraction" or "queue": bytes,
    or minus the packets) with the config's unit parser."""

def parse_per_direction(kind: str, text: str) -> tuple[float, float]:
    """A value per direction as config files write it (``"10mbit"`` for both, or
    ``"4.3mbit/409kbit"``) of ``kind`` ("rate", "size" or "queue"): ``(a→b, b→a)``."""

def monkey_pipe_queues(down_bps: int) -> tuple[str, str]:
    """Monkey Do's pipe queues for a downstream rate, as config text ``(down, up)``."""

def simulator_congestion_controls() -> list[str]:
    """The congestion controls the simulator runs (``[tcp] cc`` names)."""

# -- tables.rs -----------------------------------------------------------------------------

def table_columns(engine: str, name: str) -> list[str]:
    """The columns of result table ``name`` as ``engine`` ("sim" or "emu") writes it."""

# -- emu.rs --------------------------------------------------------------------------------

class _HostInfo(TypedDict):
    name: str
    netns: str
    ipv4: str
    ipv6: str
    first_pipe: str | None
    pipes: int
    pipe_addresses: list[str]

class _EmuResults(TypedDict):
    run: dict[str, Any]
    tables: dict[str, dict[str, list[Any]]]
    written: list[str]
    warnings: list[str]

@final
class EmuRun:
    """One emulation: the hosts exist from construction until ``stop()``; packets flow from
    construction, or with ``hold=True`` from ``go()``."""

    def __new__(cls, config_text: str, origin: str = "", json: bool = False, run_id: str | None = None,
                cc: str | None = None, spin_us: float = 0.0, high_priority: bool = True, cpu_latency_qos: bool = True,
                tcp_info: bool = True, monarch_pcap: str | None = None, offload: bool = True,
                workload: bool = False, hold: bool = False) -> Self: ...
    def go(self) -> None:
        """Lets a held run's packets flow: model time zero, the workload and sampling start."""
    @property
    def run_id(self) -> str: ...
    @property
    def state_dir(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def hosts(self) -> list[_HostInfo]: ...
    def snapshot(self) -> str:
        """Live counters as JSON text (refreshed every 250 ms)."""
    def lateness_window(self) -> str:
        """Release and timer-wake lateness since the previous call, as JSON text."""
    def is_running(self) -> bool: ...
    def workload_done(self) -> bool:
        """Whether the ``[[flow]]`` workload (``workload=True``) has ended by itself."""
    def stop(self, out_dir: _Path | None = None) -> _EmuResults:
        """Stops the loop, removes every host, returns the results (with ``out_dir``, every
        table is written there; ``flow_series`` is then left out of ``tables``)."""

def emu_cleanup_stale() -> list[str]:
    """Removes namespaces and state of runs whose owner died; returns the namespaces."""

def emu_live_runs() -> list[str]:
    """Run ids of emulations whose owner process is alive."""

# -- trace.rs ------------------------------------------------------------------------------

#: A column of ``trace_analyze``: numbers as ``(dtype, little-endian bytes)``, text as a list.
_Column = tuple[str, bytes] | list[str | None]

class _CaptureStats(TypedDict):
    frames: int
    tcp_packets: int
    other_packets: int
    non_ip: int
    bad_headers: int
    fragments: int
    snapped: int
    truncated_tail: bool
    connections: int
    first_s: float
    last_s: float

class _AnalysisSummary(TypedDict):
    stats: _CaptureStats
    connections: int
    kept: int
    pruned: list[tuple[str, int]]
    head: dict[str, list[Any]]
    exchanges: int
    cross_traffic_bins: int

class _DiagnoseStats(TypedDict):
    frames: int
    bad_headers: int
    truncated_tail: bool

def trace_analyze(path: _Path, server: str | None = None, progress: _Progress = None, threads: int = 0,
                  exchanges: bool = False, cross_traffic: bool = False
                  ) -> tuple[dict[str, _Column], dict[str, _Column] | None, _CaptureStats, dict[str, _Column] | None]:
    """Analyzes a capture (Monkey See): (connection columns, exchange columns or None,
    capture counts, cross-traffic profile columns or None)."""

def trace_analyze_files(path: _Path, conns_out: _Path | None = None, exchanges_out: _Path | None = None,
                        server: str | None = None, progress: _Progress = None, threads: int = 0,
                        head: int = 20, cross_traffic_out: _Path | None = None) -> _AnalysisSummary:
    """Analyzes a capture and writes its tables as Parquet; returns what a summary prints."""

def trace_diagnose(path: _Path, progress: _Progress = None) -> tuple[dict[str, list[Any]], _DiagnoseStats]:
    """Monarch's self-diagnosis of every probe flow in a capture: (columns, counts)."""
