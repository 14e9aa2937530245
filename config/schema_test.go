package config

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The JSON Schema of the jobs file (jobs.schema.json, for editors with
// yaml-language-server) is generated here from the Go types: field names
// from the yaml tags, required fields from the tags without omitempty,
// descriptions from the fields' doc comments, enums from the constants of
// each named string type. The test fails when the checked-in file drifts
// from the types; -update rewrites it:
//
//	go test ./config -run TestJobsSchema -update
//
// (-update is the package's one golden-file flag, catalogue_test.go.)

const schemaFile = "jobs.schema.json"

// schemaGen builds schemas from the package's types and their comments.
type schemaGen struct {
	t      *testing.T
	docs   map[string]string   // "Type.Field" -> comment
	enums  map[string][]string // named string type -> constant values
	defs   map[string]any
	fields map[string][]string // struct type -> yaml field names
}

func newSchemaGen(t *testing.T) *schemaGen {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	pkg, err := doc.NewFromFiles(fset, parsed, "github.com/shardcron/shardcron/config")
	if err != nil {
		t.Fatal(err)
	}
	g := &schemaGen{t: t, docs: map[string]string{}, enums: map[string][]string{}, defs: map[string]any{}, fields: map[string][]string{}}
	for _, typ := range pkg.Types {
		for _, spec := range typ.Decl.Specs {
			st, ok := spec.(*ast.TypeSpec).Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				text := strings.Join(strings.Fields(f.Doc.Text()), " ")
				for _, n := range f.Names {
					g.docs[typ.Name+"."+n.Name] = text
				}
			}
		}
		for _, c := range typ.Consts {
			for _, spec := range c.Decl.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						g.enums[typ.Name] = append(g.enums[typ.Name], s)
					}
				}
			}
		}
	}
	return g
}

// object describes a struct type by its yaml fields.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || name == "" {
			continue
		}
		s := g.schema(f.Type)
		if d := g.docs[t.Name()+"."+f.Name]; d != "" {
			s["description"] = d
		}
		props[name] = s
		g.fields[t.Name()] = append(g.fields[t.Name()], name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch {
	case t == reflect.TypeFor[Duration]():
		// A Go duration ("30s", "1h30m"), or 0.
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": `^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`},
			map[string]any{"const": 0},
		}}
	case t == reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		if _, ok := g.defs[t.Elem().Name()]; !ok {
			g.defs[t.Elem().Name()] = nil // placeholder against recursion
			g.defs[t.Elem().Name()] = g.object(t.Elem())
		}
		return map[string]any{"$ref": "#/$defs/" + t.Elem().Name()}
	case t.Kind() == reflect.Pointer:
		return g.schema(t.Elem()) // an optional scalar: absent is its default
	case t.Kind() == reflect.String:
		if vals, ok := g.enums[t.Name()]; ok && t.Name() != "string" {
			return map[string]any{"type": "string", "enum": vals}
		}
		return map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case t.Kind() == reflect.Int:
		return map[string]any{"type": "integer"}
	case t.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	}
	g.t.Fatalf("jobs schema: no rule for Go type %s; add one", t)
	return nil
}

// jobsSchema generates the whole schema, with the few constraints the
// types cannot say (the name's pattern and length, exactly one target).
func jobsSchema(t *testing.T) ([]byte, *schemaGen) {
	g := newSchemaGen(t)
	job := g.object(reflect.TypeFor[Job]())
	props := job["properties"].(map[string]any)
	props["name"].(map[string]any)["pattern"] = jobName.String()
	props["name"].(map[string]any)["maxLength"] = MaxNameLen
	job["allOf"] = []any{
		map[string]any{"oneOf": []any{
			map[string]any{"required": []string{"http"}},
			map[string]any{"required": []string{"exec"}},
			map[string]any{"required": []string{"func"}},
		}},
		map[string]any{"oneOf": []any{
			map[string]any{"required": []string{"schedule"}},
			map[string]any{"required": []string{"at"}},
		}},
	}
	g.defs["Job"] = job
	defaults := g.schema(reflect.TypeFor[*Defaults]())
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "https://shardcron.dev/schemas/jobs.schema.json",
		"title":                "shardcron jobs file",
		"description":          "Generated from package config's types by `go test ./config -run TestJobsSchema -update`; do not edit.",
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"jobs"},
		"properties": map[string]any{"jobs": map[string]any{
			"type": "array", "maxItems": MaxJobs, "items": map[string]any{"$ref": "#/$defs/Job"},
		}, "defaults": defaults},
		"$defs": g.defs,
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n'), g
}

func TestJobsSchema(t *testing.T) {
	got, g := jobsSchema(t)
	// The strict decoder's field lists and the types must agree, or the
	// schema would describe a file the parser refuses.
	for typ, known := range map[string][]string{"Job": jobFields, "HTTPTarget": httpFields, "ExecTarget": execFields,
		"Notify": notifyFields, "Webhook": webhookFields, "Defaults": defaultsFields} {
		if !slices.Equal(g.fields[typ], known) {
			t.Errorf("%s: yaml fields %v, the decoder knows %v", typ, g.fields[typ], known)
		}
	}
	if *update {
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (go test ./config -run TestJobsSchema -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("config/%s is out of date with the Go types: run go test ./config -run TestJobsSchema -update", schemaFile)
	}
}

// TestJobsSchemaAcceptsWhatParsesAndRejectsTypos: the shipped example and
// a file using every field validate against the schema; a typo'd field and
// a job with two targets do not, as ParseJobs refuses them.
func TestJobsSchemaAcceptsWhatParsesAndRejectsTypos(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaFile, sv); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	every := `defaults:
  notify: {on: [failure, recovery, skipped], after: 2, webhook: {url: "http://hooks/", headers: {X-A: b}, secret: "${SHARDCRON_JOB_HOOK}"}}
jobs:
  - name: a.b-c_1
    schedule: "*/10 * * * * *"
    timezone: Europe/Berlin
    http: {url: "http://x/", method: PUT, headers: {X-A: b}, body: "{}", expect_status: [200, 204]}
    timeout: 1m30s
    concurrency: replace
    misfire: run_all
    starting_deadline: 0
    suspend: true
    start_at: 2026-12-01T00:00:00Z
    end_at: "2026-12-31T00:00:00+01:00"
    max_runs: 3
    jitter: 5s
    notify: {after: 3, webhook: {url: "http://hooks/"}}
  - {name: e, schedule: "@every 1m", exec: {command: [/bin/true], dir: /tmp}, env: {K: v}}
  - {name: once, at: 2026-12-24T18:00:00Z, exec: {command: [/bin/true]}}
`
	for _, tc := range []struct {
		name, file string
		valid      bool
	}{
		{"examples/jobs.yaml", string(example), true},
		{"every field", every, true},
		{"typo", "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, misfre: skip}\n", false},
		{"two targets", "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, func: f}\n", false},
		{"bad notify kind", "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, notify: {on: [paged], webhook: {url: \"http://h/\"}}}\n", false},
		{"bad enum", "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, misfire: sometimes}\n", false},
		{"schedule and at", "jobs:\n  - {name: a, schedule: \"@every 1m\", at: 2026-12-24T18:00:00Z, exec: {command: [x]}}\n", false},
		{"neither schedule nor at", "jobs:\n  - {name: a, exec: {command: [x]}}\n", false},
		{"bad duration", "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, timeout: 30}\n", false},
	} {
		_, perr := ParseJobs(tc.name, []byte(tc.file))
		if (perr == nil) != tc.valid {
			t.Fatalf("%s: ParseJobs error %v, the case expects valid=%v", tc.name, perr, tc.valid)
		}
		var v any
		if err := yaml.Unmarshal([]byte(tc.file), &v); err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(v) // the schema sees what an editor sees: the YAML as JSON
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); (err == nil) != tc.valid {
			t.Errorf("%s: schema says %v, want valid=%v", tc.name, err, tc.valid)
		}
	}
}
