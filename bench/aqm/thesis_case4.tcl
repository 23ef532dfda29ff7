# The TCP-friendly marker thesis's Case 4 (no marker: RED with the OUT parameters) in ns-2,
# the scenario of python/pathtwin/reproduce/thesis.py: one source sends N long-lived flows
# through s - r0 - r1 - r2 - d, 100 Mbit/s links but a 10 Mbit/s r1 -> r2 running RED, the 200 ms
# round trip on r2 - d (100 ms each way), 1460-byte segments, an initial window of 2, a 1 s
# minimum RTO, delayed ACKs, starts uniform in the first second, 100 s.
# It answers whether the thesis's Reno losing more than its SACK, its goodput well under the
# link and its CoV of 0.3-0.5 come from the simulated TCP: ns-2's Reno and Sack1 show none of
# them either (tests/test_reproduce_thesis.py's KNOWN cites the numbers).
#
# usage: ns thesis_case4.tcl reno|sack FLOWS OUT_MAX_TH_PKTS SEED
#   OUT_MAX_TH_PKTS: 133.33 (200 KB, "appropriate") or 20 (30 KB, "inappropriate")
# prints: timeouts N loss PERCENT goodput BYTES_PER_S cov C
#
# Thresholds are in 1500-byte packets (ns-2's RED counts packets here): min 10 KB = 6.667,
# max_p 0.25, w_q 0.002, the 500 KB buffer = 333 packets, gentle off, ns-2's `wait`.

lassign $argv kind nflows maxth seed
set mss 1460
source [file join [file dirname [info script]] .. tcp common.tcl]
agent_defaults $mss
Agent/TCP set minrto_ 1.0
Queue/RED set thresh_ 6.667
Queue/RED set maxthresh_ $maxth
Queue/RED set linterm_ 4
Queue/RED set q_weight_ 0.002
Queue/RED set gentle_ false
Queue/RED set wait_ true
Queue/RED set bytes_ false
Queue/RED set queue_in_bytes_ false
Queue/RED set mean_pktsize_ 1500
Queue/RED set setbit_ false
Queue/RED set adaptive_ 0
Queue/RED set drop_tail_ true

set ns [new Simulator]
foreach n {s r0 r1 r2 d} { set $n [$ns node] }
$ns duplex-link $s $r0 100Mb 0.1ms DropTail
$ns duplex-link $r0 $r1 100Mb 0.1ms DropTail
$ns duplex-link $r1 $r2 10Mb 0.1ms RED
$ns duplex-link $r2 $d 100Mb 100ms DropTail
# The thesis's hosts and fast links lose nothing (1 MB buffers): 700 packets.
foreach {a b} {s r0 r0 r1 r2 d} { $ns queue-limit [set $a] [set $b] 700; $ns queue-limit [set $b] [set $a] 700 }
$ns queue-limit $r1 $r2 333
set qmon [$ns monitor-queue $r1 $r2 [open /dev/null w] 0.1]

expr {srand($seed)}
set agent [expr {$kind == "reno" ? "Agent/TCP/Reno" : "Agent/TCP/Sack1"}]
set sink [expr {$kind == "reno" ? "Agent/TCPSink/DelAck" : "Agent/TCPSink/Sack1/DelAck"}]
for {set i 0} {$i < $nflows} {incr i} {
    set tcp($i) [new $agent]
    $tcp($i) set fid_ $i
    set snk($i) [new $sink]
    $ns attach-agent $s $tcp($i)
    $ns attach-agent $d $snk($i)
    $ns connect $tcp($i) $snk($i)
    set ftp($i) [$tcp($i) attach-app FTP]
    $ns at [expr {rand()}] "$ftp($i) start"
}

proc finish {} {
    global nflows tcp qmon mss
    set timeouts 0
    set sum 0.0
    set sq 0.0
    for {set i 0} {$i < $nflows} {incr i} {
        incr timeouts [$tcp($i) set nrexmit_]
        set g [expr {[$tcp($i) set ack_] * $mss / 100.0}]
        set sum [expr {$sum + $g}]
        set sq [expr {$sq + $g * $g}]
    }
    set mean [expr {$sum / $nflows}]
    set cov [expr {sqrt(max(0.0, $sq / $nflows - $mean * $mean)) / $mean}]
    set loss [expr {100.0 * [$qmon set pdrops_] / [$qmon set parrivals_]}]
    puts [format "timeouts %d loss %.2f goodput %.0f cov %.3f" $timeouts $loss $mean $cov]
    exit 0
}
$ns at 100.0 "finish"
$ns run
