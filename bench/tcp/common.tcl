# The ns-2 side of pathtwin's dumbbell comparisons (dumbbell.tcl, cc_dumbbell.tcl): the agent
# settings matched to pathtwin's endpoint and the topology matched to the `[[link]]` configs
# that run.py and cc.py build. One place, so both comparisons stay on the same network.

# Agent/TCP defaults matched to pathtwin's endpoint (see README.md for each one's reason).
proc agent_defaults {mss} {
    global env
    Agent/TCP set useHeaders_  true
    Agent/TCP set packetSize_  $mss
    Agent/TCP set window_      100000    ;# effectively unlimited (default 20 caps cwnd)
    Agent/TCP set maxcwnd_     0
    Agent/TCP set windowInit_  2
    Agent/TCP set syn_         true      ;# a 40-byte SYN first, as pathtwin's handshake
    Agent/TCP set delay_growth_ true
    Agent/TCP set tcpTick_     0.001     ;# pathtwin's 1 ms RTT clock (rtt.rs G); default 0.01
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
    Agent/TCPSink set packetSize_ 40
    Queue/DropTail set drop_front_ false
    Queue/DropTail set queue_in_bytes_ false
}

# A 20 Mbit/s, 2 ms bottleneck r1-r2 holding QPKTS packets (plus the one on the link, as
# pathtwin counts it), and per flow i a sender s(i) and receiver d(i) on 100 Mbit/s access
# links whose delays make the flow's RTT the i-th of RTTS (ms). Fills the global arrays tcp,
# sink, s, d and sets r1, r2. QTYPE is the r1 -> r2 queue (bench/aqm: RED, dsRED/core); the
# reverse direction, which carries only ACKs, stays DropTail. ACCESSQ is each sender's
# s(i) -> r1 queue (bench/aqm/markers.py: dsRED/edge, the sender's DiffServ edge); r1 -> s(i)
# stays DropTail.
proc dumbbell {ns rtts qpkts tcpclass sinkclass {qtype DropTail} {accessq DropTail}} {
    global tcp sink s d r1 r2
    set r1 [$ns node]
    set r2 [$ns node]
    $ns simplex-link $r1 $r2 20Mb 2ms $qtype
    $ns simplex-link $r2 $r1 20Mb 2ms DropTail
    $ns queue-limit $r1 $r2 [expr {$qpkts + 1}]
    $ns queue-limit $r2 $r1 [expr {$qpkts + 1}]
    for {set i 0} {$i < [llength $rtts]} {incr i} {
        set a [expr {[lindex $rtts $i] / 2.0 - 3.0}]
        set s($i) [$ns node]
        set d($i) [$ns node]
        if {$accessq eq "DropTail"} {
            $ns duplex-link $s($i) $r1 100Mb ${a}ms DropTail
        } else {
            $ns simplex-link $s($i) $r1 100Mb ${a}ms $accessq
            $ns simplex-link $r1 $s($i) 100Mb ${a}ms DropTail
        }
        $ns duplex-link $r2 $d($i) 100Mb 1ms DropTail
        foreach {x y} [list $s($i) $r1 $r1 $s($i) $r2 $d($i) $d($i) $r2] { $ns queue-limit $x $y 10000 }
        set tcp($i) [new $tcpclass]
        $tcp($i) set fid_ $i
        set sink($i) [new $sinkclass]
        $ns attach-agent $s($i) $tcp($i)
        $ns attach-agent $d($i) $sink($i)
        $ns connect $tcp($i) $sink($i)
    }
}

# Starts an FTP source on flow i at time AT.
proc start_ftp {ns i at} {
    global tcp ftp
    set ftp($i) [new Application/FTP]
    $ftp($i) attach-agent $tcp($i)
    $ns at $at "$ftp($i) start"
}

# Each sender's cumulative ACK is read one ACK-path delay after DURATION (the reverse path
# carries only ACKs and never queues), so it counts what the receiver held at DURATION:
# schedules the caller's `snapshot i` for every flow i that late, then `finish`.
proc schedule_end {ns rtts duration} {
    set last 0
    for {set i 0} {$i < [llength $rtts]} {incr i} {
        set back [expr {[lindex $rtts $i] / 2000.0 + 0.001}]
        $ns at [expr {$duration + $back}] "snapshot $i"
        if {$back > $last} { set last $back }
    }
    $ns at [expr {$duration + $last + 0.001}] "finish"
}
