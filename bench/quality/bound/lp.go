package bound

import "math"

// packLP is a small linear program in inequality form for the upper bound
// (bound.go): maximise c·x subject to A x <= b, x >= 0, with b >= 0, so the
// origin is feasible and no first phase is needed. A is kept by column
// (sparse) for the dual check and expanded into a dense tableau to solve.
type packLP struct {
	b    []float64
	cols []lpCol
}

// lpCol is one variable: its objective coefficient, its supply row (where
// its coefficient is 1; every column has one, which bounds the program and
// lets dualBound repair any prices) and its other nonzero rows.
type lpCol struct {
	c      float64
	supply int
	rows   []int
	vals   []float64
}

// addRow appends a constraint row with right-hand side rhs and returns its
// index.
func (p *packLP) addRow(rhs float64) int {
	p.b = append(p.b, rhs)
	return len(p.b) - 1
}

// lpTol is the simplex's pivot and optimality tolerance; the rows are
// scaled so that coefficients and right-hand sides are of order 1..1e4.
const lpTol = 1e-9

// perturb scales solveDual's right-hand-side perturbation (at most
// 1009 perturb per row).
const perturb = 1e-9

// maxPivots stops a simplex that has not converged; the dual it leaves is
// still repaired into a valid (looser) bound.
const maxPivots = 20000

// solveDual runs a primal simplex (Dantzig's rule, Bland's after a run of
// degenerate pivots) on the dense tableau and returns the row prices it
// ends with, clamped at zero. Any prices are acceptable to the caller:
// dualBound turns them into a valid bound; optimal prices give the LP's
// value.
func (p *packLP) solveDual() []float64 {
	y, _ := p.solve()
	return y
}

// solve is solveDual that also returns the primal solution the simplex
// ends with, one value per column (of the perturbed program, so it may
// exceed a row by the perturbation; callers round it down).
func (p *packLP) solve() (y, x []float64) {
	m, n := len(p.b), len(p.cols)
	w := n + m + 1 // structural, slack, rhs
	tab := make([][]float64, m)
	for i := range tab {
		tab[i] = make([]float64, w)
		tab[i][n+i] = 1
		// A tiny, deterministic perturbation of the right-hand side
		// breaks the ties that make degenerate pivots; the prices are
		// checked on the true program by dualBound.
		tab[i][w-1] = p.b[i] + perturb*float64(1+(i*7919)%1009)
	}
	obj := make([]float64, w)
	for j, col := range p.cols {
		obj[j] = -col.c
		tab[col.supply][j] = 1
		for k, r := range col.rows {
			tab[r][j] = col.vals[k]
		}
	}
	basis := make([]int, m)
	for i := range basis {
		basis[i] = n + i
	}
	nz := make([]int, 0, w)
	degenerate := 0
	for range maxPivots {
		bland := degenerate > 50
		q := -1
		best := -lpTol
		for j := 0; j < w-1; j++ {
			if obj[j] < best {
				q, best = j, obj[j]
				if bland {
					break
				}
			}
		}
		if q < 0 {
			break // optimal
		}
		r := -1
		var ratio float64
		for i := range tab {
			a := tab[i][q]
			if a <= lpTol {
				continue
			}
			v := tab[i][w-1] / a
			if r < 0 || v < ratio-1e-12 || (v <= ratio+1e-12 && basis[i] < basis[r]) {
				r, ratio = i, v
			}
		}
		if r < 0 {
			// Unbounded cannot happen when every column has a finite
			// supply row; stop and let the caller repair the prices.
			break
		}
		if ratio <= 1e-12 {
			degenerate++
		} else {
			degenerate = 0
		}
		pr := tab[r]
		inv := 1 / pr[q]
		nz = nz[:0]
		for j, v := range pr {
			if v != 0 {
				pr[j] = v * inv
				nz = append(nz, j)
			}
		}
		pr[q] = 1
		for i := range tab {
			if i == r {
				continue
			}
			row := tab[i]
			f := row[q]
			if f == 0 {
				continue
			}
			for _, j := range nz {
				v := row[j] - f*pr[j]
				if math.Abs(v) < 1e-13 {
					v = 0
				}
				row[j] = v
			}
			row[q] = 0
		}
		if f := obj[q]; f != 0 {
			for _, j := range nz {
				obj[j] -= f * pr[j]
			}
			obj[q] = 0
		}
		basis[r] = q
	}
	y = make([]float64, m)
	for i := range y {
		y[i] = max(obj[n+i], 0)
	}
	x = make([]float64, n)
	for i, j := range basis {
		if j < n {
			x[j] = max(tab[i][w-1], 0)
		}
	}
	return y, x
}

// dualBound is the weak-duality bound of prices y >= 0 on the rows: every
// supply row's price is raised to the largest reduced profit of its
// columns, which makes the prices dual-feasible whatever y is, and the
// bound is then y·b plus the supply prices times the supplies. For any x
// with A x <= b and x >= 0, c·x is at most this value.
func (p *packLP) dualBound(y []float64) float64 {
	isSupply := make([]bool, len(p.b))
	for _, col := range p.cols {
		isSupply[col.supply] = true
	}
	mu := make([]float64, len(p.b))
	for _, col := range p.cols {
		red := col.c
		for k, r := range col.rows {
			red -= price(y[r]) * col.vals[k]
		}
		mu[col.supply] = max(mu[col.supply], red)
	}
	var total float64
	for i, rhs := range p.b {
		if isSupply[i] {
			total += mu[i] * rhs
		} else {
			total += price(y[i]) * rhs
		}
	}
	return total
}

// price is a row price usable in dualBound: negative or NaN prices (from a
// simplex gone wrong) become 0, which any bound may use.
func price(v float64) float64 {
	if v > 0 && !math.IsInf(v, 1) {
		return v
	}
	return 0
}
