# pathtwin bench/tcp: ns-2 side of the RTT-mix dumbbell (see README.md for every choice).
#
#   ns dumbbell.tcl VARIANT TIMER DURATION_S RTTS_MS STARTS_S [TRACE_FILE]
#
# VARIANT: reno | newreno | sack (Agent/TCP/Reno, Agent/TCP/Newreno with Agent/TCPSink,
# Agent/TCP/Sack1 with Agent/TCPSink/Sack1).  TIMER: impatient | slow-but-steady, NewReno's
# partial-ACK timer (newreno_changes1_ 1 | 0); ignored by the others.  RTTS_MS: the base RTT
# of each flow, comma-separated (e.g. 20,40,80,160).  STARTS_S: each flow's start time,
# comma-separated (bench/tcp/run.py draws them, the same for pathtwin).  TRACE_FILE: if given, a packet trace
# of the whole run (ns-2 trace format) for diagnosis, and TRACE_FILE.vars each sender's
# cwnd_, ssthresh_, dupacks_ and nrexmit_ (timeouts) whenever they change.
#
# s_i --100 Mbit/s, RTT_i/2 - 3 ms-- r1 ==20 Mbit/s, 2 ms, 50p DropTail== r2 --100 Mbit/s, 1 ms-- d_i
#
# Prints one JSON line: per flow the payload bytes delivered in
# order by DURATION (from the sender's cumulative ACK, read one ACK-path delay later),
# retransmitted packets and retransmission timeouts.

if {$argc < 5} {
    puts stderr "usage: ns dumbbell.tcl reno|newreno|sack impatient|slow-but-steady DURATION_S RTTS_MS STARTS_S \[TRACE_FILE\]"
    exit 2
}
set variant  [lindex $argv 0]
set timer    [lindex $argv 1]
set duration [lindex $argv 2]
set rtts     [split [lindex $argv 3] ","]
set starts   [split [lindex $argv 4] ","]
set tracefile [expr {$argc > 5 ? [lindex $argv 5] : ""}]
set nflows   [llength $rtts]

switch -- $variant {
    reno    { set tcpclass Agent/TCP/Reno;    set sinkclass Agent/TCPSink }
    newreno { set tcpclass Agent/TCP/Newreno; set sinkclass Agent/TCPSink }
    sack    { set tcpclass Agent/TCP/Sack1;   set sinkclass Agent/TCPSink/Sack1 }
    default { puts stderr "unknown variant $variant"; exit 2 }
}
switch -- $timer {
    impatient         { set changes1 1 }
    slow-but-steady   { set changes1 0 }
    default { puts stderr "unknown timer $timer"; exit 2 }
}

# 1460 payload + 40 bytes TCP/IP = 1500 on the wire.  With useHeaders_ true (ns-2.35's
# default) the agent adds the 40 header bytes to packetSize_ itself (the trace shows
# 1500-byte packets), so packetSize_ is the payload; with useHeaders_ false it would be the
# whole packet.
set mss     1460

source [file join [file dirname [info script]] common.tcl]
agent_defaults $mss
Agent/TCP/Newreno set newreno_changes1_ $changes1
Agent/TCP/Newreno set partial_window_deflation_ 1

set ns [new Simulator]
if {$tracefile != ""} {
    set tf [open $tracefile w]
    $ns trace-all $tf
}

dumbbell $ns $rtts 50 $tcpclass $sinkclass
for {set i 0} {$i < $nflows} {incr i} {
    start_ftp $ns $i [lindex $starts $i]
    if {$tracefile != ""} {
        if {$i == 0} { set vf [open $tracefile.vars w] }
        $tcp($i) attach $vf
        foreach v {cwnd_ ssthresh_ dupacks_ nrexmit_} { $tcp($i) trace $v }
    }
}

# Each sender's cumulative ACK, read at the time `schedule_end` (common.tcl) gives.
proc snapshot {i} {
    global tcp mss got rex tos
    set pk [$tcp($i) set ack_]
    if {$pk < 0} { set pk 0 }
    set got($i) [expr {wide($pk) * $mss}]
    set rex($i) [$tcp($i) set nrexmitpack_]
    set tos($i) [$tcp($i) set nrexmit_]
}

proc finish {} {
    global nflows got rex tos duration variant timer rtts tracefile ns
    set rows {}
    for {set i 0} {$i < $nflows} {incr i} {
        lappend rows [format {{"rtt_ms": %s, "bytes": %s, "retransmits": %d, "timeouts": %d}} \
            [lindex $rtts $i] $got($i) $rex($i) $tos($i)]
    }
    puts [format {{"peer": "ns-2", "variant": "%s", "timer": "%s", "duration_s": %s, "flows": [%s]}} \
        $variant $timer $duration [join $rows ", "]]
    if {$tracefile != ""} { $ns flush-trace }
    exit 0
}

schedule_end $ns $rtts $duration
$ns run
