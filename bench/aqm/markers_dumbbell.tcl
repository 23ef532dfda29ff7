# pathtwin bench/aqm: ns-2 side of the DiffServ marker scenarios (markers.py, README.md).
#
#   ns markers_dumbbell.tcl DURATION_S RTTS_MS STARTS_S QUEUE_PKTS WARMUP_S RIO POLICIES
#
# bench/tcp's dumbbell (common.tcl) with a DiffServ edge on every sender's access link
# (s(i) -> r1 is a Queue/dsRED/edge whose policy meters and marks flow i) and a
# Queue/dsRED/core in RIO-C mode on the bottleneck r1 -> r2. Every flow is a Reno bulk
# transfer.
#
# RIO: IN_MIN,IN_MAX,IN_MAX_P,OUT_MIN,OUT_MAX,OUT_MAX_P,W_Q (packets).
# POLICIES: one per flow, separated by ";", each the policer and its parameters
# (ns-2's addPolicyEntry units: rates in bit/s, bucket sizes in bytes):
#   TokenBucket:CIR:CBS   srTCM:CIR:CBS:EBS   trTCM:CIR:CBS:PIR:PBS
#
# Code points: 10 green (the policy's initial code point), 11 the first downgrade (yellow
# for srTCM/trTCM, out-of-profile for TokenBucket), 12 red (srTCM/trTCM). The core maps
# 10 to precedence 0 (IN) and 11 and 12 to precedence 1 (OUT): pathtwin's RIO has two
# drop precedences, green = IN, yellow and red = OUT. The edges' own RED thresholds
# (5000/9000 packets on a 10000-packet access queue) are never reached: the edges only mark.
#
# Prints one JSON line: per flow the payload bytes delivered by DURATION and the packets
# its edge coloured green, yellow and red; at the bottleneck the arrivals and the early and
# forced drops per code point; and the RIO-C total average (getAverage, precedence 1's
# average over the whole queue) sampled every 0.1 s from WARMUP_S.

if {$argc < 7} {
    puts stderr "usage: ns markers_dumbbell.tcl DURATION_S RTTS_MS STARTS_S QUEUE_PKTS WARMUP_S RIO POLICIES"
    exit 2
}
set duration [lindex $argv 0]
set rtts     [split [lindex $argv 1] ","]
set starts   [split [lindex $argv 2] ","]
set qpkts    [lindex $argv 3]
set warmup   [lindex $argv 4]
set rio      [split [lindex $argv 5] ","]
set policies [split [lindex $argv 6] ";"]
set nflows   [llength $rtts]
set mss      1460
if {[llength $policies] != $nflows} {
    puts stderr "need one policy per flow ($nflows), got [llength $policies]"
    exit 2
}

source [file join [file dirname [info script]] .. tcp common.tcl]
agent_defaults $mss

set ns [new Simulator]
dumbbell $ns $rtts $qpkts Agent/TCP/Reno Agent/TCPSink dsRED/core dsRED/edge

set core [[$ns link $r1 $r2] queue]
lassign $rio in_min in_max in_max_p out_min out_max out_max_p w_q
$core meanPktSize 500
$core set numQueues_ 1
$core setNumPrec 2
$core setMREDMode RIO-C
$core addPHBEntry 10 0 0
$core addPHBEntry 11 0 1
$core addPHBEntry 12 0 1
$core configQ 0 0 $in_min $in_max $in_max_p $w_q
$core configQ 0 1 $out_min $out_max $out_max_p $w_q

for {set i 0} {$i < $nflows} {incr i} {
    set p [split [lindex $policies $i] ":"]
    set kind [lindex $p 0]
    set e [[$ns link $s($i) $r1] queue]
    set edge($i) $e
    $e meanPktSize 1500
    $e set numQueues_ 1
    $e setNumPrec 2
    $e addPolicyEntry [$s($i) id] [$d($i) id] $kind 10 {*}[lrange $p 1 end]
    if {$kind eq "TokenBucket"} {
        $e addPolicerEntry $kind 10 11
    } else {
        $e addPolicerEntry $kind 10 11 12
    }
    $e addPHBEntry 10 0 0
    $e addPHBEntry 11 0 1
    $e addPHBEntry 12 0 1
    $e configQ 0 0 5000 9000 0.01
    $e configQ 0 1 5000 9000 0.01
}

for {set i 0} {$i < $nflows} {incr i} { start_ftp $ns $i [lindex $starts $i] }

set trace {}
proc sample {} {
    global ns core trace
    lappend trace [format %.4f [$core getAverage 0]]
    $ns at [expr {[$ns now] + 0.1}] "sample"
}
$ns at $warmup "sample"

proc snapshot {i} {
    global tcp mss got
    set pk [$tcp($i) set ack_]
    if {$pk < 0} { set pk 0 }
    set got($i) [expr {wide($pk) * $mss}]
}

proc stat {q what cp} { return [expr {int([$q getStat $what $cp])}] }

proc finish {} {
    global nflows got edge core trace
    set rows {}
    for {set i 0} {$i < $nflows} {incr i} {
        set e $edge($i)
        lappend rows [format {{"bytes": %s, "green": %d, "yellow": %d, "red": %d, "edge_drops": %d}} $got($i) \
            [stat $e pkts 10] [stat $e pkts 11] [stat $e pkts 12] [expr {int([$e getStat drops] + [$e getStat edrops])}]]
    }
    set cps {}
    foreach cp {10 11 12} {
        lappend cps [format {"%d": {"arrivals": %d, "drops": %d, "edrops": %d}} $cp \
            [stat $core pkts $cp] [stat $core drops $cp] [stat $core edrops $cp]]
    }
    puts [format {{"peer": "ns-2", "core": {%s}, "avg_trace": [%s], "flows": [%s]}} \
        [join $cps ", "] [join $trace ", "] [join $rows ", "]]
    exit 0
}

schedule_end $ns $rtts $duration
$ns run
