# pathtwin bench: ns-2 side of the dumbbell benchmark (see README.md for every choice).
#
#   ns dumbbell.tcl DURATION_S FLOWS [QUEUE_PKTS] [MAX_WINDOW_PKTS] [STAGGER_S] [SACK] [BOTTLENECK_MBIT] [ROUTING]
#
# QUEUE_PKTS: packets waiting at the bottleneck besides the one being serialised (pathtwin's
# "100p"); MAX_WINDOW_PKTS: receiver window in segments; SACK: 0 = NewReno (default),
# 1 = Agent/TCP/Sack1 with Agent/TCPSink/Sack1 (a cross-check, see README.md);
# BOTTLENECK_MBIT: bottleneck rate (default 10); ROUTING: static (default) or manual.
# Static routing is ns-2's default but computes all-pairs routes (an n x n table, and one
# classifier entry per node pair): at 10 000 flows (20 002 nodes) that alone would need
# ~13 GB and hours, so the scaling benchmark (scale.py) installs the dumbbell's few routes by
# hand (rtproto Manual); packets are classified by the same Classifier/Hash/Dest either way.
#
# Prints one JSON line on stdout.  No trace files are written: the bottleneck is counted
# with a QueueMonitor (pdepartures_) and goodput from each sender's cumulative ACK (ack_).

if {$argc < 2} {
    puts stderr "usage: ns dumbbell.tcl DURATION_S FLOWS \[QUEUE_PKTS\] \[MAX_WINDOW_PKTS\] \[STAGGER_S\] \[SACK\] \[BOTTLENECK_MBIT\] \[ROUTING\]"
    exit 2
}
set duration [lindex $argv 0]
set nflows   [lindex $argv 1]
set queue    [expr {$argc > 2 ? [lindex $argv 2] : 100}]
set maxwnd   [expr {$argc > 3 ? [lindex $argv 3] : 684}]
set stagger  [expr {$argc > 4 ? [lindex $argv 4] : 0.1}]
set sack     [expr {$argc > 5 ? [lindex $argv 5] : 0}]
set bnmbit   [expr {$argc > 6 ? [lindex $argv 6] : 10}]
set routing  [expr {$argc > 7 ? [lindex $argv 7] : "static"}]
if {$routing ne "static" && $routing ne "manual"} {
    puts stderr "ROUTING must be static or manual, not $routing"
    exit 2
}
if {$sack} {
    set tcpclass Agent/TCP/Sack1
    set sinkclass Agent/TCPSink/Sack1
} else {
    set tcpclass Agent/TCP/Newreno
    set sinkclass Agent/TCPSink
}

# Segment: 1460 payload + 40 bytes TCP/IP = 1500 bytes on the wire.  ns-2's one-way TCP
# puts packetSize_ bytes on the wire (headers included), so 1500, not 1460.
set mss     1460
set hdr     40
set pktsize [expr {$mss + $hdr}]

Agent/TCP set packetSize_  $pktsize
Agent/TCP set window_      $maxwnd   ;# receiver window in packets (default 20 caps cwnd!)
Agent/TCP set maxcwnd_     0         ;# no extra cap on cwnd
Agent/TCP set windowInit_  2         ;# initial window, segments
Agent/TCP set syn_         true      ;# a 40-byte SYN as packet 0, as ns-3/pathtwin handshake
Agent/TCP set delay_growth_ true
Agent/TCP set tcpTick_     0.001     ;# 1 ms RTT clock (ns-3 ClockGranularity 1 ms); default 10 ms
Agent/TCP set minrto_      0.2
Agent/TCP set maxrto_      60
Agent/TCP set rtxcur_init_ 1.0       ;# RFC 6298 initial RTO 1 s (ns-2 default 3 s)
Agent/TCP set numdupacks_  3
Agent/TCP set singledup_   1         ;# limited transmit (RFC 3042), ns-2 and ns-3 default
Agent/TCP set timestamps_  false
Agent/TCP set ecn_         0
Agent/TCP set maxburst_    0
Agent/TCP set overhead_    0
Agent/TCP/Newreno set newreno_changes1_ 1           ;# RFC 6582-style partial-ACK handling
Agent/TCP/Newreno set partial_window_deflation_ 1
Agent/TCPSink set packetSize_ 40     ;# pure ACK: 40 bytes; one ACK per segment (no DelAck)

set ns [new Simulator]
if {$routing eq "manual"} {
    $ns rtproto Manual   ;# before any node is created: nodes get the Manual routing module
}

# ns-2's DropTail admits an arrival only while length+1 < limit_, so limit_ counts the
# packet being serialised too: limit_ = Q+1 gives Q packets waiting, as pathtwin's "Qp".
Queue/DropTail set drop_front_ false
Queue/DropTail set queue_in_bytes_ false
set qlim [expr {$queue + 1}]

set r1 [$ns node]
set r2 [$ns node]
$ns duplex-link $r1 $r2 ${bnmbit}Mb 45ms DropTail
$ns queue-limit $r1 $r2 $qlim
$ns queue-limit $r2 $r1 $qlim

# Manual routing: NODE's next hop towards NEXT (or, with -default, for everything else).
proc route {node args} {
    eval [list [$node get-module Manual] add-route-to-adj-node] $args
}
if {$routing eq "manual"} {
    route $r1 -default $r2
    route $r2 -default $r1
}

set qmon [new QueueMonitor]
[$ns link $r1 $r2] attach-monitors [new SnoopQueue/In] [new SnoopQueue/Out] [new SnoopQueue/Drop] $qmon

for {set i 0} {$i < $nflows} {incr i} {
    set s($i) [$ns node]
    set d($i) [$ns node]
    $ns duplex-link $s($i) $r1 100Mb 2.5ms DropTail
    $ns duplex-link $r2 $d($i) 100Mb 2.5ms DropTail
    foreach {a b} [list $s($i) $r1 $r1 $s($i) $r2 $d($i) $d($i) $r2] { $ns queue-limit $a $b 1000 }
    if {$routing eq "manual"} {
        # s_i and d_i send everything to their router; each router knows its own side's hosts
        # and sends the rest across the bottleneck.
        route $s($i) -default $r1
        route $d($i) -default $r2
        route $r1 $s($i)
        route $r2 $d($i)
    }
    set tcp($i) [new $tcpclass]
    $tcp($i) set fid_ $i
    set sink($i) [new $sinkclass]
    $ns attach-agent $s($i) $tcp($i)
    $ns attach-agent $d($i) $sink($i)
    $ns connect $tcp($i) $sink($i)
    set ftp($i) [new Application/FTP]
    $ftp($i) attach-agent $tcp($i)
    $ns at [expr {$i * $stagger}] "$ftp($i) start"
}

# Snapshot the bottleneck counters at DURATION; read each sender's cumulative ACK one ACK
# path delay later (r2->r1 45 ms + two 2.5 ms access links + three 40-byte serialisations,
# the reverse path carries only ACKs and never queues), so that ack_ equals what the
# receiver had in order at DURATION -- the quantity ns-3's PacketSink and pathtwin report.
# (TCPSink's bytes_ also counts duplicate arrivals, so it overstates goodput.)
set ackdelay [expr {0.045 + 2 * 0.0025 + 40 * 8 / ($bnmbit * 1e6) + 2 * 40 * 8 / 100e6}]

proc snapshot {} {
    global qmon snap t0
    set snap(engine) [expr {([clock clicks -microseconds] - $t0) / 1e6}]
    foreach v {pdepartures_ parrivals_ pdrops_} { set snap($v) [$qmon set $v] }
}

proc finish {} {
    global ns nflows tcp duration mss snap t0 sack
    set engine [expr {([clock clicks -microseconds] - $t0) / 1e6}]
    set delivered 0
    set per {}
    set retx 0
    set tos 0
    for {set i 0} {$i < $nflows} {incr i} {
        # ack_: highest cumulative ACK; packet 0 is the SYN, so ack_ = data packets delivered.
        set pk [$tcp($i) set ack_]
        if {$pk < 0} { set pk 0 }
        set bytes [expr {wide($pk) * $mss}]
        incr delivered $bytes
        lappend per $bytes
        incr retx [$tcp($i) set nrexmitpack_]
        incr tos  [$tcp($i) set nrexmit_]
    }
    puts [format {{"peer": "ns-2", "duration_s": %s, "flows": %d, "sack": %s, "engine_wall_s": %.4f, "bottleneck_departures": %d, "bottleneck_arrivals": %d, "bottleneck_drops": %d, "bytes_delivered": %s, "goodput_bps": %.1f, "retransmitted_packets": %d, "timeouts": %d, "per_flow_bytes": [%s]}} \
        $duration $nflows [expr {$sack ? "true" : "false"}] $snap(engine) $snap(pdepartures_) $snap(parrivals_) $snap(pdrops_) \
        $delivered [expr {$delivered * 8.0 / $duration}] $retx $tos [join $per ", "]]
    exit 0
}

$ns at $duration "snapshot"
$ns at [expr {$duration + $ackdelay}] "finish"
set t0 [clock clicks -microseconds]
$ns run
