# pathtwin bench/tcp: Fall & Floyd's one-to-four-drop scenarios ("Simulation-based
# Comparisons of Tahoe, Reno, and SACK TCP", CCR 1996), as ns-2's
# tcl/test/test-suite-tcpVariants.tcl sets them up, for one finite transfer.
#
#   ns fall_floyd.tcl VARIANT PACKETS DROPS TRACE_FILE
#
# VARIANT: reno | newreno | sack.  PACKETS: data packets the FTP sends.  DROPS: the packets
# the bottleneck's error model drops, counted as they reach it from 0, comma-separated
# (test-suite: onedrop 14, twodrops 14,28, threedrops 14,26,28, fourdrops 14,24,26,28).
# TRACE_FILE: the ns-2 packet trace; bench/tcp/fall_floyd.py reads the drops and the
# completion time (the arrival at s1 of the ACK of the last packet) from it.
#
# s1 --8 Mbit/s, 0 ms-- r1 ==800 kbit/s, 100 ms, limit 8== k1; window_ 28, packetSize_
# 1000 (the test suite's; with useHeaders_ true the agent adds 40 header bytes, so 1040 on
# the wire), the transfer starts at 1.0 s.  Unlike the test suite, which
# keeps the 1990s defaults of the paper (minrto_ 1 s, initial RTO 6 s, no limited
# transmit, NewReno without partial window deflation), every setting below is one
# pathtwin's endpoint also has, set to the same value there (tests/ns2_fall_floyd.rs).

if {$argc < 4} {
    puts stderr "usage: ns fall_floyd.tcl reno|newreno|sack PACKETS DROPS TRACE_FILE"
    exit 2
}
set variant   [lindex $argv 0]
set packets   [lindex $argv 1]
set drops     [split [lindex $argv 2] ","]
set tracefile [lindex $argv 3]

switch -- $variant {
    reno    { set tcpclass Agent/TCP/Reno;    set sinkclass Agent/TCPSink }
    newreno { set tcpclass Agent/TCP/Newreno; set sinkclass Agent/TCPSink }
    sack    { set tcpclass Agent/TCP/Sack1;   set sinkclass Agent/TCPSink/Sack1 }
    default { puts stderr "unknown variant $variant"; exit 2 }
}

Agent/TCP set useHeaders_  true
Agent/TCP set packetSize_  1000      ;# payload; 1040 bytes on the wire
Agent/TCP set window_      28
Agent/TCP set maxcwnd_     0
Agent/TCP set windowInit_  2
Agent/TCP set syn_         true
Agent/TCP set delay_growth_ true
Agent/TCP set tcpTick_     0.001
Agent/TCP set minrto_      1         ;# RFC 6298 (2.4), the paper's era
Agent/TCP set maxrto_      60
Agent/TCP set rtxcur_init_ 1.0
Agent/TCP set numdupacks_  3
Agent/TCP set singledup_   0         ;# no limited transmit, as the test suite's base runs
Agent/TCP set timestamps_  false
Agent/TCP set ecn_         0
Agent/TCP set maxburst_    0
Agent/TCP set overhead_    0
Agent/TCP/Newreno set newreno_changes1_ 1         ;# RFC 6582's Impatient timer, ns-2's default
Agent/TCP/Newreno set partial_window_deflation_ 1 ;# RFC 6582 step 5, ns-2's default
Agent/TCPSink set packetSize_ 40

set ns [new Simulator]
set tf [open $tracefile w]
$ns trace-all $tf

set s1 [$ns node]
set r1 [$ns node]
set k1 [$ns node]
$ns duplex-link $s1 $r1 8Mb 0ms DropTail
$ns duplex-link $r1 $k1 800Kb 100ms DropTail
$ns queue-limit $r1 $k1 8
$ns queue-limit $k1 $r1 8

set em [new ErrorModule Fid]
set lossy [$ns link $r1 $k1]
$lossy errormodule $em
set errmodel [new ErrorModel/List]
$errmodel droplist $drops
$em insert $errmodel
$em bind $errmodel 1

set tcp [new $tcpclass]
$tcp set fid_ 1
# ns-2's bugFix_ (default true) keeps even Reno from a second fast retransmit until the
# ACK passes the highest packet sent at the first (RFC 6582 §3.2 step 1, the "careful"
# variant); pathtwin's Reno, like RFC 5681's, has no such gate, and NewReno and SACK have
# it in both.  Reno is therefore compared with bugFix_ off.
if {$variant == "reno"} { $tcp set bugFix_ false }
set sink [new $sinkclass]
$ns attach-agent $s1 $tcp
$ns attach-agent $k1 $sink
$ns connect $tcp $sink
set ftp [new Application/FTP]
$ftp attach-agent $tcp
$ns at 1.0 "$ftp produce $packets"

proc finish {} {
    global ns tf tcp
    $ns flush-trace
    close $tf
    puts [format {{"timeouts": %d, "retransmits": %d}} [$tcp set nrexmit_] [$tcp set nrexmitpack_]]
    exit 0
}
$ns at 60.0 "finish"
$ns run
