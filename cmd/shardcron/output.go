package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// Output formats of -o, which every command that prints a result takes.
// json and yaml print the very value the HTTP API serves for the same
// thing (the same field names); table is for people.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

var formats = []string{formatTable, formatJSON, formatYAML}

// outputFlag is a command's -o/--output.
type outputFlag struct{ format string }

// bindOutput adds -o/--output (default table) to c.
func bindOutput(c *cobra.Command) *outputFlag {
	o := &outputFlag{}
	c.Flags().StringVarP(&o.format, "output", "o", formatTable, "output format: table, json or yaml")
	return o
}

// check refuses a format other than table, json and yaml as a usage error;
// commands call it before they contact anything.
func (o *outputFlag) check() error {
	if !slices.Contains(formats, o.format) {
		return usageError{fmt.Errorf("--output %q: want table, json or yaml", o.format)}
	}
	return nil
}

// write prints v: as indented JSON, as YAML with the same field names, or
// through table.
func (o *outputFlag) write(w io.Writer, v any, table func(io.Writer) error) error {
	return writeAs(w, o.format, v, table)
}

func writeAs(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatYAML:
		b, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	default:
		return table(w)
	}
}

// toYAML encodes v as YAML through its JSON encoding, so the field names,
// their order and the value formats (times, durations) are the JSON ones.
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// blockStyle turns the flow style JSON parses into (and its quoting of
// every string) into plain block YAML, keeping the tags so that a string
// that looks like a number stays quoted.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// clusterRun is the RunE of a command that prints a result it reads from or
// writes to the cluster: it checks -o, connects with the command's settings
// and runs fn, closing the connection after.
func clusterRun(f *clusterFlags, o *outputFlag, fn func(c *cobra.Command, ctx context.Context, ec *etcdClient, args []string) error,
	checks ...func() error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if err := o.check(); err != nil {
			return err
		}
		for _, check := range checks { // bad flags are refused before etcd is asked
			if err := check(); err != nil {
				return err
			}
		}
		ctx, done, ec, err := f.connect(c)
		if err != nil {
			return err
		}
		defer done()
		return fn(c, ctx, ec, args)
	}
}
