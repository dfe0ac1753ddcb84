// Package cli is the quality command's body: it runs the placement-quality
// experiment of package quality for the traces, policies and seeds asked
// for, and writes CSV rows, a markdown table and SVG plots.
package cli
