package storetest

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

// BenchmarkAccept measures concurrent check-ins on s, an open store on an
// empty database: 32 goroutines per GOMAXPROCS accept reports of a worker
// check-in's size (benchReportSize) for 100 streams in turn. Besides the
// time per check-in it reports the process's CPU time per check-in
// (cpu-µs/op: the store's work, which the time hides while it waits for
// the disk). Every store's benchmark runs it, so their figures compare.
func BenchmarkAccept(b *testing.B, s live.Store) {
	ctx := b.Context()
	p, sv, streams := Streams(b, s, 100)
	report := []byte(`{"pad":"` + strings.Repeat("x", benchReportSize-10) + `"}`)
	b.SetParallelism(32)
	b.ResetTimer()
	cpu0 := ProcessCPU(b)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := streams[n.Add(1)%int64(len(streams))]
			if _, err := s.Accept(ctx, live.Registration{StreamID: id, Report: report, ServiceID: sv.ID, SubjectID: p.ID}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	ReportCPU(b, cpu0)
}

// benchReportSize is the size of the seed's full worker check-in, the body
// ovlive's load benchmark sends.
const benchReportSize = 1281

// ReportCPU reports, as cpu-µs/op, the process's CPU time since start (a
// ProcessCPU reading) per operation of b.
func ReportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((ProcessCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// ProcessCPU is the user and system CPU time the process has used so far,
// for a benchmark's CPU time per operation (ReportCPU).
func ProcessCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLookupCheckIn measures the one read a check-in makes (the
// credential, its service, the stream, the subject), from many goroutines.
func BenchmarkLookupCheckIn(b *testing.B, s live.Store) {
	ctx := b.Context()
	p, err := s.CreatePerson(ctx, live.Person{Name: "Ada"})
	if err != nil {
		b.Fatal(err)
	}
	sv, err := s.CreateService(ctx, live.Service{Name: "w", FirstParty: true, Capabilities: []string{live.CapabilityRegister}})
	if err != nil {
		b.Fatal(err)
	}
	st, err := s.CreateStream(ctx, live.Stream{OwnerID: p.ID})
	if err != nil {
		b.Fatal(err)
	}
	secret, hash, err := live.NewSecret(live.KindServiceToken)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateCredential(ctx, live.Credential{Kind: live.KindServiceToken, ServiceID: sv.ID, Hash: hash}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := s.LookupCheckIn(ctx, live.HashSecret(secret), st.ID, p.ID)
			if err != nil || l.Credential == nil || l.Stream == nil || !l.SubjectKnown {
				b.Errorf("LookupCheckIn = %+v, %v", l, err)
				return
			}
		}
	})
}

// Streams creates, on s, a person (the owner), a service and n streams of
// that person, for check-ins from that service about that person; it
// returns them, the streams by id.
func Streams(tb testing.TB, s live.Store, n int) (live.Person, live.Service, []string) {
	tb.Helper()
	ctx := tb.Context()
	p, err := s.CreatePerson(ctx, live.Person{Name: "Ada"})
	if err != nil {
		tb.Fatal(err)
	}
	sv, err := s.CreateService(ctx, live.Service{Name: "w"})
	if err != nil {
		tb.Fatal(err)
	}
	streams := make([]string, 0, n)
	for range n {
		st, err := s.CreateStream(ctx, live.Stream{OwnerID: p.ID})
		if err != nil {
			tb.Fatal(err)
		}
		streams = append(streams, st.ID)
	}
	return p, sv, streams
}
