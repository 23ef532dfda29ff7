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

Agent/TCP set useHeaders_  true
Agent/TCP set packetSize_  $mss
Agent/TCP set window_      100000    ;# effectively unlimited (default 20 caps cwnd)
Agent/TCP set maxcwnd_     0
Agent/TCP set windowInit_  2
Agent/TCP set syn_         true      ;# a 40-byte SYN first, as pathtwin's handshake
Agent/TCP set delay_growth_ true
Agent/TCP set tcpTick_     0.001     ;# pathtwin's 1 ms RTT clock (rtt.rs G); default 0.01
# run.py --ns2-tick sets another tick (ns-2's default 0.01) to show what the clock changes.
if {[info exists env(PATHTWIN_NS2_TCPTICK)]} { Agent/TCP set tcpTick_ $env(PATHTWIN_NS2_TCPTICK) }
Agent/TCP set minrto_      0.2
Agent/TCP set maxrto_      60
Agent/TCP set rtxcur_init_ 1.0
Agent/TCP set numdupacks_  3
Agent/TCP set singledup_   1         ;# limited transmit, as pathtwin
Agent/TCP set timestamps_  false
Agent/TCP set ecn_         0
Agent/TCP set maxburst_    0
Agent/TCP set overhead_    0
Agent/TCP/Newreno set newreno_changes1_ $changes1
Agent/TCP/Newreno set partial_window_deflation_ 1
Agent/TCPSink set packetSize_ 40

set ns [new Simulator]
if {$tracefile != ""} {
    set tf [open $tracefile w]
    $ns trace-all $tf
}

Queue/DropTail set drop_front_ false
Queue/DropTail set queue_in_bytes_ false

set r1 [$ns node]
set r2 [$ns node]
$ns duplex-link $r1 $r2 20Mb 2ms DropTail
# limit_ counts the packet being serialised: 51 = pathtwin's "50p" waiting.
$ns queue-limit $r1 $r2 51
$ns queue-limit $r2 $r1 51

for {set i 0} {$i < $nflows} {incr i} {
    set rtt [lindex $rtts $i]
    set a [expr {$rtt / 2.0 - 3.0}]
    set s($i) [$ns node]
    set d($i) [$ns node]
    $ns duplex-link $s($i) $r1 100Mb ${a}ms DropTail
    $ns duplex-link $r2 $d($i) 100Mb 1ms DropTail
    foreach {x y} [list $s($i) $r1 $r1 $s($i) $r2 $d($i) $d($i) $r2] { $ns queue-limit $x $y 10000 }
    set tcp($i) [new $tcpclass]
    $tcp($i) set fid_ $i
    set sink($i) [new $sinkclass]
    $ns attach-agent $s($i) $tcp($i)
    $ns attach-agent $d($i) $sink($i)
    $ns connect $tcp($i) $sink($i)
    set ftp($i) [new Application/FTP]
    $ftp($i) attach-agent $tcp($i)
    $ns at [lindex $starts $i] "$ftp($i) start"
    if {$tracefile != ""} {
        if {$i == 0} { set vf [open $tracefile.vars w] }
        $tcp($i) attach $vf
        foreach v {cwnd_ ssthresh_ dupacks_ nrexmit_} { $tcp($i) trace $v }
    }
}

# Each sender's cumulative ACK is read one ACK-path delay after DURATION (the reverse path
# carries only ACKs and never queues), so it counts what the receiver held at DURATION.
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

set last 0
for {set i 0} {$i < $nflows} {incr i} {
    set back [expr {[lindex $rtts $i] / 2000.0 + 0.001}]
    $ns at [expr {$duration + $back}] "snapshot $i"
    if {$back > $last} { set last $back }
}
$ns at [expr {$duration + $last + 0.001}] "finish"
$ns run
