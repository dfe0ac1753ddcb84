// Command modelmix shows, for one trace and seed, where each policy has
// put the GPU by card model when the arrivals reach a given percentage of
// capacity, and which GPU pods it failed until then: the instrument of
// docs/quality.md's "Fragment at 100% arrival" and "The limit".
//
// Per policy it prints the allocation, then one line per card model (its
// cards, the cards wholly free, the free GPU and the GPU held by pods
// that name models in gpu_spec and by pods that may run anywhere, all in
// cards), then the free GPU by what is left on a card (and how many of
// the arrived shares could use it), how many shares of each size were
// placed of those arrived, then the failed GPU pods grouped by the models they accept, the
// cards each asks for and whether some node of an accepted model had the
// cards free (then only CPU or memory was lacking), largest GPU first.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/vgpushare/vshare/bench/quality"
)

func main() {
	dir := flag.String("trace-dir", "bench/testdata/openb", "directory of the openb CSV files (plain or .csv.gz)")
	trace := flag.String("trace", "gpuspec33", "pod list (default, gpuspec33, ...)")
	policies := flag.String("policies", "fragment,volcano-builtin,binpack", "comma-separated policies; \"offline\" is the offline packing quality.OfflinePacking keeps for the -at point (it knows the arrivals; -at an integer)")
	seed := flag.Int64("seed", 42, "seed")
	at := flag.Float64("at", 100, "stop once this percentage of the GPU capacity has arrived (0 < at <= 130)")
	top := flag.Int("top", 12, "failed pod groups shown per policy")
	flag.Parse()
	if *at <= 0 || *at > quality.MaxArrival {
		fail(fmt.Errorf("-at %g: want a percentage in (0, %d]", *at, quality.MaxArrival))
	}
	if *top < 0 {
		fail(fmt.Errorf("-top %d: want 0 or more", *top))
	}
	t, err := quality.LoadTrace(*dir, *trace)
	if err != nil {
		fail(err)
	}
	for _, p := range strings.Split(*policies, ",") {
		if err := run(os.Stdout, t, p, *seed, *at, *top); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "modelmix:", err)
	os.Exit(1)
}

// group is the failed pods of one kind.
type group struct {
	spec      string
	num       int
	someFree  bool
	pods      int
	milli     int64
	shareOnly bool
}

type modelUse struct {
	cards, idleCards   int
	free, named, anyOf int64
}

func run(w io.Writer, t *quality.Trace, policy string, seed int64, at float64, top int) error {
	f, err := quality.FactoryFor(policy)
	if policy == "offline" {
		// The placement quality.OfflinePacking keeps for this point.
		f, err = quality.OfflineFactory(int(at)), nil
	}
	if err != nil {
		return err
	}
	arr := quality.Arrange(t, seed)
	c := quality.NewCluster(t, arr.Rank)
	pol, err := f(quality.Env{Trace: t, Seed: seed})
	if err != nil {
		return fmt.Errorf("create policy %s: %w", policy, err)
	}
	capacity := t.Capacity()
	use := map[string]*modelUse{}
	for i := range c.Nodes {
		u := use[c.Nodes[i].Model]
		if u == nil {
			u = &modelUse{}
			use[c.Nodes[i].Model] = u
		}
		u.cards += len(c.Nodes[i].Free)
	}
	groups := map[group]*group{}
	var arrived, failed int64
	var shares []int64 // milli of every arrived share of one card
	placedShares := map[int64]int{}
	for i := range arr.Pods {
		p := &arr.Pods[i]
		if float64(arrived+p.GPUMilli())*100 > at*float64(capacity) {
			break
		}
		arrived += p.GPUMilli()
		if p.NumGPU == 1 && p.Milli < quality.MilliPerGPU {
			shares = append(shares, p.Milli)
		}
		n, cards, ok, err := pol.Place(c, p)
		if err != nil {
			return fmt.Errorf("%s seed %d arrival %d: %w", policy, seed, i, err)
		}
		spec := strings.Join(p.Spec, "|")
		if !ok {
			if p.NumGPU == 0 {
				continue
			}
			k := group{spec: spec, num: p.NumGPU, someFree: someFree(c, p), shareOnly: p.Milli < quality.MilliPerGPU}
			g := groups[k]
			if g == nil {
				g = &group{spec: k.spec, num: k.num, someFree: k.someFree, shareOnly: k.shareOnly}
				groups[k] = g
			}
			g.pods++
			g.milli += p.GPUMilli()
			failed += p.GPUMilli()
			continue
		}
		if err := c.Place(n, cards, p); err != nil {
			return fmt.Errorf("%s seed %d arrival %d: %w", policy, seed, i, err)
		}
		if p.NumGPU == 1 && p.Milli < quality.MilliPerGPU {
			placedShares[p.Milli]++
		}
		if spec != "" {
			use[c.Nodes[n].Model].named += p.GPUMilli()
		} else {
			use[c.Nodes[n].Model].anyOf += p.GPUMilli()
		}
	}
	for i := range c.Nodes {
		u := use[c.Nodes[i].Model]
		for _, f := range c.Nodes[i].Free {
			u.free += f
			if f == quality.MilliPerGPU {
				u.idleCards++
			}
		}
	}
	fmt.Fprintf(w, "%s %s seed %d at %.0f%% arrival: allocated %.2f%%, failed GPU pods %.1f cards\n",
		t.Name, policy, seed, at, float64(c.Used)*100/float64(capacity), cards(failed))
	fmt.Fprintln(w, "  model      cards  idle cards    free  named-held  any-held")
	models := make([]string, 0, len(use))
	for m := range use {
		models = append(models, m)
	}
	slices.SortFunc(models, func(a, b string) int { return cmp.Or(cmp.Compare(use[b].cards, use[a].cards), cmp.Compare(a, b)) })
	for _, m := range models {
		u := use[m]
		fmt.Fprintf(w, "  %-8s  %6d  %10d  %6.1f  %10.1f  %8.1f\n", m, u.cards, u.idleCards, cards(u.free), cards(u.named), cards(u.anyOf))
	}
	writeLeft(w, c, shares)
	writeShares(w, shares, placedShares)
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int {
		return cmp.Or(cmp.Compare(b.milli, a.milli), cmp.Compare(a.spec, b.spec), cmp.Compare(a.num, b.num))
	})
	fmt.Fprintln(w, "  failed: accepts                       cards  kind   pods   GPU  accepted model had the cards free")
	for i, g := range list {
		if i == top {
			break
		}
		spec, kind := cmp.Or(g.spec, "any"), "whole"
		if g.shareOnly {
			kind = "share"
		}
		fmt.Fprintf(w, "          %-30s  %5d  %-5s  %4d  %5.1f  %v\n", spec, g.num, kind, g.pods, cards(g.milli), g.someFree)
	}
	return nil
}

// leftBuckets are the ranges of free milli writeLeft groups cards by.
var leftBuckets = [][2]int64{{1000, 1000}, {500, 999}, {200, 499}, {150, 199}, {100, 149}, {50, 99}, {1, 49}}

// writeLeft prints where the free GPU is: per range of free milli on a
// card, the cards and their free GPU, and how many of the shares that
// arrived (of all arrived shares) are small enough to use every card of
// the range (milli at most its low end).
func writeLeft(w io.Writer, c *quality.Cluster, shares []int64) {
	fmt.Fprintln(w, "  left on a card (milli)  cards    free  shares arrived that fit it")
	for _, b := range leftBuckets {
		var n int
		var free int64
		for i := range c.Nodes {
			for _, f := range c.Nodes[i].Free {
				if f >= b[0] && f <= b[1] {
					n++
					free += f
				}
			}
		}
		fit := 0
		for _, m := range shares {
			if m <= b[0] {
				fit++
			}
		}
		fmt.Fprintf(w, "  %4d-%-4d               %5d  %6.1f  %d of %d\n", b[0], b[1], n, cards(free), fit, len(shares))
	}
}

// writeShares prints, per share size (milli of one card), how many
// arrived and how many were placed, the most arrived first.
func writeShares(w io.Writer, shares []int64, placed map[int64]int) {
	arrived := map[int64]int{}
	for _, m := range shares {
		arrived[m]++
	}
	sizes := make([]int64, 0, len(arrived))
	for m := range arrived {
		sizes = append(sizes, m)
	}
	slices.SortFunc(sizes, func(a, b int64) int { return cmp.Or(cmp.Compare(arrived[b], arrived[a]), cmp.Compare(a, b)) })
	var b strings.Builder
	for _, m := range sizes {
		fmt.Fprintf(&b, " %d: %d of %d,", m, placed[m], arrived[m])
	}
	fmt.Fprintf(w, "  shares placed of arrived, by milli:%s\n", strings.TrimSuffix(b.String(), ","))
}

// someFree reports whether a node of a model the pod accepts has the
// pod's cards free (so the pod failed for CPU or memory only).
func someFree(c *quality.Cluster, p *quality.Pod) bool {
	for n := range c.Nodes {
		if p.Accepts(c.Nodes[n].Model) && c.FitsGPU(n, p) {
			return true
		}
	}
	return false
}

func cards(milli int64) float64 { return float64(milli) / quality.MilliPerGPU }
