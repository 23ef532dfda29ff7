// pathtwin bench: ns-3 side of the dumbbell benchmark (see README.md for every choice).
//
//   dumbbell-ns3 --duration=60 --flows=10 [--queue=100] [--maxWindow=1000000] [--stagger=0.1]
//                [--sack=0]
//
// Prints one JSON line on stdout. Built by run.py:
//   g++ -O2 -std=c++17 -I/usr/include dumbbell.cc -o ../out/sim/dumbbell-ns3 \
//       -lns3-core -lns3-network -lns3-internet -lns3-point-to-point -lns3-applications \
//       -lns3-traffic-control
//
// Topology: s_i -- r1 ==== r2 -- d_i. Access links 100 Mbit/s 2.5 ms, bottleneck
// 10 Mbit/s 45 ms. Every device gets a FifoQueueDisc (replacing ns-3's default FqCoDel) and a
// 1-packet device queue, so the qdisc is where packets wait. pathtwin's "Qp" means Q packets
// waiting besides the one being serialised; here that is in the qdisc + 1 in the device
// queue.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace ns3;

static uint64_t g_bottleneckTx = 0;

static void
CountTx(Ptr<const Packet>)
{
    ++g_bottleneckTx;
}

int
main(int argc, char* argv[])
{
    double duration = 60.0;
    uint32_t flows = 10;
    uint32_t queue = 100;          // packets waiting at the bottleneck (pathtwin semantics)
    uint32_t accessQueue = 1000;   // packets waiting at access links
    uint32_t maxWindow = 1000000;  // bytes: receiver buffer = largest advertised window
    double stagger = 0.1;          // flow i starts at i*stagger seconds
    uint32_t mss = 1460;
    bool sack = false;             // true: SACK (RFC 6675 recovery) as a cross-check, see README

    CommandLine cmd(__FILE__);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("flows", "number of bulk flows", flows);
    cmd.AddValue("queue", "bottleneck packets waiting (excluding the one being sent)", queue);
    cmd.AddValue("accessQueue", "access-link packets waiting", accessQueue);
    cmd.AddValue("maxWindow", "receiver window in bytes", maxWindow);
    cmd.AddValue("stagger", "start of flow i is i*stagger seconds", stagger);
    cmd.AddValue("sack", "enable SACK", sack);
    cmd.Parse(argc, argv);

    // TCP: NewReno with classic (RFC 6582) recovery, not ns-3's default PRR.
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpNewReno::GetTypeId()));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));   // default 536
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(2));     // default 10
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));     // ACK every segment
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 * maxWindow));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(maxWindow));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(1)));  // default 3 s
    Config::SetDefault("ns3::TcpSocket::InitialSlowStartThreshold",
                       UintegerValue(0xffffffff));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));  // default 1 s
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MilliSeconds(1)));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));  // 12 B/segment
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::ReTxThreshold", UintegerValue(3));
    Config::SetDefault("ns3::RttEstimator::InitialEstimation", TimeValue(Seconds(1)));

    NodeContainer r;
    r.Create(2);
    NodeContainer s;
    s.Create(flows);
    NodeContainer d;
    d.Create(flows);

    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
    bottleneck.SetChannelAttribute("Delay", StringValue("45ms"));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1p"));
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue("100Mbps"));
    access.SetChannelAttribute("Delay", StringValue("2.5ms"));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1p"));

    NetDeviceContainer bDev = bottleneck.Install(r.Get(0), r.Get(1));
    std::vector<NetDeviceContainer> sDev, dDev;
    for (uint32_t i = 0; i < flows; ++i)
    {
        sDev.push_back(access.Install(s.Get(i), r.Get(0)));
        dDev.push_back(access.Install(r.Get(1), d.Get(i)));
    }

    InternetStackHelper stack;
    stack.InstallAll();

    // Queue discs must be installed before addresses are assigned, or Ipv4AddressHelper
    // installs the default FqCoDel on every device.
    TrafficControlHelper bTc;
    bTc.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                         StringValue(std::to_string(queue - 1) + "p"));
    QueueDiscContainer bQd = bTc.Install(bDev);
    TrafficControlHelper aTc;
    aTc.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                         StringValue(std::to_string(accessQueue - 1) + "p"));
    for (uint32_t i = 0; i < flows; ++i)
    {
        aTc.Install(sDev[i]);
        aTc.Install(dDev[i]);
    }

    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.252");
    addr.Assign(bDev);
    std::vector<Ipv4InterfaceContainer> dIf;
    for (uint32_t i = 0; i < flows; ++i)
    {
        addr.NewNetwork();
        addr.Assign(sDev[i]);
        addr.NewNetwork();
        dIf.push_back(addr.Assign(dDev[i]));
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const uint16_t port = 5000;
    std::vector<Ptr<PacketSink>> sinks;
    for (uint32_t i = 0; i < flows; ++i)
    {
        PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                    InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sa = sinkHelper.Install(d.Get(i));
        sa.Start(Seconds(0));
        sinks.push_back(DynamicCast<PacketSink>(sa.Get(0)));

        BulkSendHelper bulk("ns3::TcpSocketFactory",
                            InetSocketAddress(dIf[i].GetAddress(1), port));
        bulk.SetAttribute("MaxBytes", UintegerValue(0));
        bulk.SetAttribute("SendSize", UintegerValue(mss));
        ApplicationContainer ba = bulk.Install(s.Get(i));
        ba.Start(Seconds(i * stagger));
    }

    // Bottleneck departures: packets whose serialisation on r1->r2 has finished.
    bDev.Get(0)->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&CountTx));

    Simulator::Stop(Seconds(duration));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double engine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    uint64_t delivered = 0;
    std::string per;
    for (uint32_t i = 0; i < flows; ++i)
    {
        uint64_t b = sinks[i]->GetTotalRx();
        delivered += b;
        per += (i ? ", " : "") + std::to_string(b);
    }
    const QueueDisc::Stats& st = bQd.Get(0)->GetStats();
    Ptr<PointToPointNetDevice> bd = DynamicCast<PointToPointNetDevice>(bDev.Get(0));
    uint64_t devDrops = bd->GetQueue()->GetTotalDroppedPackets();
    std::printf("{\"peer\": \"ns-3\", \"duration_s\": %g, \"flows\": %u, \"sack\": %s, "
                "\"engine_wall_s\": %.4f, "
                "\"bottleneck_departures\": %llu, \"bottleneck_arrivals\": %llu, "
                "\"bottleneck_drops\": %llu, \"bytes_delivered\": %llu, \"goodput_bps\": %.1f, "
                "\"per_flow_bytes\": [%s]}\n",
                duration, flows, sack ? "true" : "false", engine, (unsigned long long)g_bottleneckTx,
                (unsigned long long)st.nTotalReceivedPackets,
                (unsigned long long)(st.nTotalDroppedPackets + devDrops),
                (unsigned long long)delivered, delivered * 8.0 / duration, per.c_str());
    Simulator::Destroy();
    return 0;
}
