# pathtwin bench/aqm: ns-2 side of the AQM dumbbell (see README.md beside this file).
#
#   ns aqm_dumbbell.tcl QDISC DURATION_S RTTS_MS STARTS_S QUEUE_PKTS WARMUP_S PARAMS
#
# QDISC: red | rio.  The bottleneck r1 -> r2 (20 Mbit/s, 2 ms, bench/tcp/common.tcl) runs
# Queue/RED or Queue/dsRED/core in RIO-C mode; every flow is a Reno bulk transfer.
# PARAMS, comma-separated:
#   red: MIN_TH,MAX_TH,MAX_P,W_Q,GENTLE,WAIT           (packets; GENTLE and WAIT 0 or 1;
#        empty: ns-2's own defaults, the average queue then in bytes)
#   rio: IN_MIN,IN_MAX,IN_MAX_P,OUT_MIN,OUT_MAX,OUT_MAX_P,W_Q
# Every packet leaves the senders unmarked (code point 0), which the RIO queue maps to the
# IN precedence, as pathtwin's RIO files unmarked traffic (markers_dumbbell.tcl marks). ns-2's dsRED has neither gentle nor wait (dsredq.cc); pathtwin's side turns
# them off for this scenario.
#
# Prints one JSON line: per flow the payload bytes delivered by DURATION; at the
# bottleneck the arrivals, early and forced drops (all drops for RED, whose early drops
# ns-2 does not count apart), the per-class arrivals and drops (RIO), and the mean of the
# average queue sampled every 0.1 s after WARMUP_S.

if {$argc < 7} {
    puts stderr "usage: ns aqm_dumbbell.tcl red|rio DURATION_S RTTS_MS STARTS_S QUEUE_PKTS WARMUP_S PARAMS"
    exit 2
}
set qdisc    [lindex $argv 0]
set duration [lindex $argv 1]
set rtts     [split [lindex $argv 2] ","]
set starts   [split [lindex $argv 3] ","]
set qpkts    [lindex $argv 4]
set warmup   [lindex $argv 5]
set params   [split [lindex $argv 6] ","]
set nflows   [llength $rtts]
set mss      1460

source [file join [file dirname [info script]] .. tcp common.tcl]
agent_defaults $mss

switch -- $qdisc {
    red {
        # No PARAMS: Queue/RED exactly as ns-2.35 ships it (automatic thresholds and weight,
        # byte mode, queue in bytes), the defaults pathtwin's bare qdisc = "red" follows.
        if {[llength $params] > 0} {
            lassign $params min_th max_th max_p w_q gentle wait
            Queue/RED set thresh_        $min_th
            Queue/RED set maxthresh_     $max_th
            Queue/RED set linterm_       [expr {1.0 / $max_p}]
            Queue/RED set q_weight_      $w_q
            Queue/RED set gentle_        [expr {$gentle ? "true" : "false"}]
            Queue/RED set wait_          [expr {$wait ? "true" : "false"}]
            Queue/RED set bytes_         false
            Queue/RED set queue_in_bytes_ false
            Queue/RED set mean_pktsize_  500
            Queue/RED set setbit_        false
            Queue/RED set adaptive_      0
            Queue/RED set cautious_      0
            Queue/RED set drop_tail_     true
        }
        set qtype RED
    }
    rio { set qtype dsRED/core }
    default { puts stderr "unknown qdisc $qdisc"; exit 2 }
}

set ns [new Simulator]
dumbbell $ns $rtts $qpkts Agent/TCP/Reno Agent/TCPSink $qtype
set bq [[$ns link $r1 $r2] queue]
if {$qdisc == "rio"} {
    lassign $params in_min in_max in_max_p out_min out_max out_max_p w_q
    $bq meanPktSize 500
    $bq set numQueues_ 1
    $bq setNumPrec 2
    $bq setMREDMode RIO-C
    $bq addPHBEntry 0 0 0    ;# unmarked: IN
    $bq addPHBEntry 11 0 1   ;# OUT (no sender uses it here)
    $bq configQ 0 0 $in_min $in_max $in_max_p $w_q
    $bq configQ 0 1 $out_min $out_max $out_max_p $w_q
}
set qmon [$ns monitor-queue $r1 $r2 [open /dev/null w] 0.1]

for {set i 0} {$i < $nflows} {incr i} { start_ftp $ns $i [lindex $starts $i] }

set avg_sum 0.0
set avg_n 0
proc sample {} {
    global ns bq qdisc avg_sum avg_n
    set a [expr {$qdisc == "red" ? [$bq set ave_] : [$bq getAverage 0]}]
    set avg_sum [expr {$avg_sum + $a}]
    incr avg_n
    $ns at [expr {[$ns now] + 0.1}] "sample"
}
$ns at $warmup "sample"

proc snapshot {i} {
    global tcp mss got
    set pk [$tcp($i) set ack_]
    if {$pk < 0} { set pk 0 }
    set got($i) [expr {wide($pk) * $mss}]
}

proc finish {} {
    global nflows got qmon bq qdisc avg_sum avg_n duration rtts
    set rows {}
    for {set i 0} {$i < $nflows} {incr i} {
        lappend rows [format {{"rtt_ms": %s, "bytes": %s}} [lindex $rtts $i] $got($i)]
    }
    set arrivals [$qmon set parrivals_]
    if {$qdisc == "rio"} {
        set early [expr {int([$bq getStat edrops])}]
        set forced [expr {int([$bq getStat drops])}]
        set in_arr [expr {int([$bq getStat pkts 0])}]
        set in_drops [expr {int([$bq getStat drops 0] + [$bq getStat edrops 0])}]
        set out_arr [expr {int([$bq getStat pkts 11])}]
        set out_drops [expr {int([$bq getStat drops 11] + [$bq getStat edrops 11])}]
    } else {
        set early -1
        set forced -1
        set in_arr $arrivals
        set in_drops [$qmon set pdrops_]
        set out_arr 0
        set out_drops 0
    }
    puts [format {{"peer": "ns-2", "qdisc": "%s", "arrivals": %d, "drops": %d, "early_drops": %d, "forced_drops": %d, "in_arrivals": %d, "in_drops": %d, "out_arrivals": %d, "out_drops": %d, "avg_queue": %f, "flows": [%s]}} \
        $qdisc $arrivals [$qmon set pdrops_] $early $forced $in_arr $in_drops $out_arr $out_drops \
        [expr {$avg_n ? $avg_sum / $avg_n : -1}] [join $rows ", "]]
    exit 0
}

schedule_end $ns $rtts $duration
$ns run
