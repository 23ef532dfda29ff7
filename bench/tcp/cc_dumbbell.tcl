# pathtwin bench/tcp: ns-2 side of the Vegas / CUBIC / BIC dumbbell (see README.md,
# "Vegas, CUBIC and BIC").
#
#   ns cc_dumbbell.tcl CC DURATION_S RTTS_MS STARTS_S QUEUE_PKTS [WARMUP_S]
#
# CC: vegas (ns-2's own Agent/TCP/Vegas, alpha 1, beta 3, gamma 1, with Agent/TCPSink) |
# cubic | bic (Agent/TCP/Linux, ns-2.35's port of the Linux 2.6 congestion-control modules,
# `select_ca cubic|bic`, with Agent/TCPSink/Sack1 as test-suite-tcpLinux.tcl uses it; the
# port has no HyStart).  QUEUE_PKTS: packets that may wait at the bottleneck (ns-2's
# limit_ is one more: it counts the packet being serialised).  WARMUP_S (default 0): the
# measurements cover WARMUP_S..DURATION only (steady state, without the slow start).
#
# s_i --100 Mbit/s, RTT_i/2 - 3 ms-- r1 ==20 Mbit/s, 2 ms, DropTail== r2 --100 Mbit/s, 1 ms-- d_i
#
# Prints one JSON line: per flow the payload bytes delivered in order from WARMUP to DURATION
# and the timeouts of the whole run; for the bottleneck the time-mean packets waiting (queue monitor) and the fraction
# of time the link serialised (bytes departed / capacity), whose sum is comparable with
# pathtwin's queue occupancy (which counts the packet on the link).

if {$argc < 5} {
    puts stderr "usage: ns cc_dumbbell.tcl vegas|cubic|bic DURATION_S RTTS_MS STARTS_S QUEUE_PKTS"
    exit 2
}
set cc       [lindex $argv 0]
set duration [lindex $argv 1]
set rtts     [split [lindex $argv 2] ","]
set starts   [split [lindex $argv 3] ","]
set qpkts    [lindex $argv 4]
set warmup   [expr {$argc > 5 ? [lindex $argv 5] : 0}]
set nflows   [llength $rtts]
set mss      1460
set rate_bps 20e6

switch -- $cc {
    vegas   { set tcpclass Agent/TCP/Vegas; set sinkclass Agent/TCPSink }
    cubic - bic { set tcpclass Agent/TCP/Linux; set sinkclass Agent/TCPSink/Sack1 }
    default { puts stderr "unknown cc $cc"; exit 2 }
}

# The settings shared with dumbbell.tcl (common.tcl; README.md, part 1 table): packetSize_ is the payload with
# useHeaders_ true, window effectively unlimited, 1 ms RTT clock, 200 ms minimum RTO.
source [file join [file dirname [info script]] common.tcl]
agent_defaults $mss
Agent/TCP/Vegas set packetSize_ [expr {$mss + 40}]
Agent/TCP/Vegas set v_alpha_ 1
Agent/TCP/Vegas set v_beta_  3
Agent/TCP/Vegas set v_gamma_ 1

set ns [new Simulator]
dumbbell $ns $rtts $qpkts $tcpclass $sinkclass
set qmon [$ns monitor-queue $r1 $r2 ""]
for {set i 0} {$i < $nflows} {incr i} {
    if {$cc != "vegas"} { $ns at 0.0 "$tcp($i) select_ca $cc" }
    start_ftp $ns $i [lindex $starts $i]
}

proc snapshot {i at} {
    global tcp mss got tos
    set pk [$tcp($i) set ack_]
    if {$pk < 0} { set pk 0 }
    set got($i,$at) [expr {wide($pk) * $mss}]
    set tos($i,$at) [$tcp($i) set nrexmit_]
}

# The queue is read at WARMUP and DURATION: the time integral of packets waiting, and bytes
# departed.
proc queue_snapshot {at} {
    global qmon qsum qdep
    set qsum($at) [[$qmon get-pkts-integrator] set sum_]
    set qdep($at) [$qmon set bdepartures_]
}

proc finish {} {
    global nflows got tos duration warmup cc rtts qsum qdep rate_bps
    set span [expr {$duration - $warmup}]
    set qmean [expr {($qsum(end) - $qsum(warm)) / $span}]
    set busy [expr {($qdep(end) - $qdep(warm)) * 8.0 / $rate_bps / $span}]
    set rows {}
    for {set i 0} {$i < $nflows} {incr i} {
        lappend rows [format {{"rtt_ms": %s, "bytes": %s, "timeouts": %d}} [lindex $rtts $i] \
            [expr {$got($i,end) - $got($i,warm)}] $tos($i,end)]
    }
    puts [format {{"peer": "ns-2", "cc": "%s", "duration_s": %s, "warmup_s": %s, "queue_waiting": %.4f, "link_busy": %.4f, "flows": [%s]}} \
        $cc $duration $warmup $qmean $busy [join $rows ", "]]
    exit 0
}

# PATHTWIN_NS2_SAMPLE=FILE: every 0.1 s, each sender's cwnd_ and the packets waiting at the
# bottleneck (time cwnd_0 .. cwnd_n-1 waiting), for diagnosis.
if {[info exists env(PATHTWIN_NS2_SAMPLE)]} {
    set sf [open $env(PATHTWIN_NS2_SAMPLE) w]
    proc sample {} {
        global ns sf tcp nflows qmon
        set row [list [$ns now]]
        for {set i 0} {$i < $nflows} {incr i} { lappend row [$tcp($i) set cwnd_] }
        lappend row [$qmon set pkts_]
        puts $sf [join $row " "]
        $ns at [expr {[$ns now] + 0.1}] "sample"
    }
    $ns at 0.0 "sample"
}

set last 0
for {set i 0} {$i < $nflows} {incr i} {
    set back [expr {[lindex $rtts $i] / 2000.0 + 0.001}]
    $ns at [expr {$warmup + $back}] "snapshot $i warm"
    $ns at [expr {$duration + $back}] "snapshot $i end"
    if {$back > $last} { set last $back }
}
$ns at $warmup "queue_snapshot warm"
$ns at $duration "queue_snapshot end"
$ns at [expr {$duration + $last + 0.001}] "finish"
$ns run
