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

# The settings of dumbbell.tcl (README.md, part 1 table): packetSize_ is the payload with
# useHeaders_ true, window effectively unlimited, 1 ms RTT clock, 200 ms minimum RTO.
Agent/TCP set useHeaders_  true
Agent/TCP set packetSize_  $mss
Agent/TCP set window_      100000
Agent/TCP set maxcwnd_     0
Agent/TCP set windowInit_  2
Agent/TCP set syn_         true
Agent/TCP set delay_growth_ true
Agent/TCP set tcpTick_     0.001
Agent/TCP set minrto_      0.2
Agent/TCP set maxrto_      60
Agent/TCP set rtxcur_init_ 1.0
Agent/TCP set numdupacks_  3
Agent/TCP set singledup_   1
Agent/TCP set timestamps_  false
Agent/TCP set ecn_         0
Agent/TCP set maxburst_    0
Agent/TCP set overhead_    0
# ns-2's Vegas sends its own segments (tcp-vegas.cc output()) without adding the 40 header
# bytes that useHeaders_ makes the base agent add: checked with a queue monitor, 1460-byte
# packets with packetSize_ 1460. Its packetSize_ is therefore the wire size; the payload
# counted per acknowledged packet stays $mss.
Agent/TCP/Vegas set packetSize_ [expr {$mss + 40}]
Agent/TCP/Vegas set v_alpha_ 1
Agent/TCP/Vegas set v_beta_  3
Agent/TCP/Vegas set v_gamma_ 1
Agent/TCPSink set packetSize_ 40

set ns [new Simulator]
Queue/DropTail set drop_front_ false
Queue/DropTail set queue_in_bytes_ false

set r1 [$ns node]
set r2 [$ns node]
$ns duplex-link $r1 $r2 20Mb 2ms DropTail
$ns queue-limit $r1 $r2 [expr {$qpkts + 1}]
$ns queue-limit $r2 $r1 [expr {$qpkts + 1}]
set qmon [$ns monitor-queue $r1 $r2 ""]

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
    if {$cc != "vegas"} { $ns at 0.0 "$tcp($i) select_ca $cc" }
    set ftp($i) [new Application/FTP]
    $ftp($i) attach-agent $tcp($i)
    $ns at [lindex $starts $i] "$ftp($i) start"
}

# Each sender's cumulative ACK (and timeouts) is read one ACK-path delay after WARMUP and
# after DURATION; the difference is what the receiver got in between.
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
