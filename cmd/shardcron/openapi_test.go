package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// openAPISchemas compiles the document's component schemas.
type openAPISchemas struct {
	t *testing.T
	c *jsonschema.Compiler
}

func newOpenAPISchemas(t *testing.T, doc []byte) *openAPISchemas {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", v); err != nil {
		t.Fatal(err)
	}
	return &openAPISchemas{t: t, c: c}
}

// check validates body against the schema at ref (a JSON pointer in the
// document, as "#/components/schemas/State").
func (s *openAPISchemas) check(what, ref string, body []byte) {
	s.t.Helper()
	sch, err := s.c.Compile("openapi.json" + ref)
	if err != nil {
		s.t.Fatalf("compile %s: %v", ref, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		s.t.Errorf("%s: not JSON: %v\n%s", what, err, body)
		return
	}
	if err := sch.Validate(v); err != nil {
		s.t.Errorf("%s does not match %s: %v\n%s", what, ref, err, body)
	}
}

type apiOperation struct {
	Responses map[string]struct {
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

// TestAPIResponsesMatchOpenAPI: a running replica serves the document it
// embeds, and every documented operation answers what the document says,
// with exactly the documented field names (schemas are closed). The CLI's
// -o json of the same things matches the same schemas.
func TestAPIResponsesMatchOpenAPI(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "openapi")
	closed, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	jobs := writeFile(t, "jobs.yaml", "jobs:\n"+
		"  - {name: alpha, schedule: \"* * * * * *\", http: {url: \"http://"+closed+"/a\"}}\n"+
		"  - {name: beta, schedule: \"@every 1h\", exec: {command: [\"true\"]}, suspend: true}\n"+
		"  - {name: gamma, schedule: \"* * * * * *\", items: 3, http: {url: \"http://"+closed+"/g\"}}\n"+
		"  - {name: delta, schedule: \"@every 1h\", item_names: [eu, us, ap], concurrency: allow, exec: {command: [\"true\"]}}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	srv := startOpsServer(t, etcd, "openapi", "solo", 8)
	base := "http://" + srv.HTTPAddr(time.Second)
	poll.MustEvery(t, procEvery, 60*time.Second, "alpha's runs served", poll.True(func() bool {
		return strings.Contains(httpGet(t, srv.HTTPAddr(time.Second), "/api/v1/jobs/alpha/runs"), `"status"`)
	}))
	poll.MustEvery(t, procEvery, 30*time.Second, "ready", poll.True(func() bool { return httpGet(t, srv.HTTPAddr(time.Second), "/readyz") == "ready\n" }))

	code, served := call(t, "GET", base+"/api/v1/openapi.json")
	if code != 200 || !bytes.Equal(served, dashboard.OpenAPI) {
		t.Fatalf("GET /api/v1/openapi.json: %d, equal to the embedded document: %v", code, bytes.Equal(served, dashboard.OpenAPI))
	}
	var doc struct {
		Paths map[string]map[string]apiOperation `json:"paths"`
	}
	if err := json.Unmarshal(served, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := newOpenAPISchemas(t, served)
	var paths []string
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		for method, op := range doc.Paths[path] {
			url := base + strings.ReplaceAll(path, "{name}", "alpha")
			method = strings.ToUpper(method)
			if path == "/api/v1/events" {
				checkEvents(t, schemas, url)
				continue
			}
			if path == "/api/v1/jobs/{name}/trigger" {
				continue // alpha is suspended by now (paths run in order); checkTrigger, below
			}
			code, body := call(t, method, url)
			ok, found := op.Responses["200"]
			if code != 200 || !found {
				t.Errorf("%s %s: %d, want 200 (documented: %v)\n%s", method, path, code, found, body)
				continue
			}
			if _, isJSON := ok.Content["application/json"]; isJSON {
				schemas.check(method+" "+path, responseRef(path, method, "200"), body)
			}
		}
	}
	checkErrors(t, schemas, doc.Paths, base)
	// The CLI prints the same things with the same fields.
	for _, tc := range []struct {
		args []string
		ref  string
	}{
		{[]string{"history", "alpha", "-o", "json"}, "#/components/schemas/History"},
		{[]string{"suspend", "alpha", "-o", "json"}, "#/components/schemas/SuspendResult"},
		{[]string{"resume", "alpha", "-o", "json"}, "#/components/schemas/SuspendResult"},
	} {
		out, stderr, code := runCLI(t, env, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		schemas.check(strings.Join(tc.args, " "), tc.ref, []byte(out))
	}
	checkTrigger(t, schemas, env, base)
	checkItems(t, schemas, env, srv.HTTPAddr(time.Second), base)
	checkItemOps(t, schemas, env, base)
}

// checkItems: a sharded job's row and detail carry its items summary, and
// ?items=true a page of its items, as documented; gamma's items run (and
// fail) every second, and `status` counts them.
func checkItems(t *testing.T, schemas *openAPISchemas, env []string, addr, base string) {
	t.Helper()
	// Every item's record and newest run are read: all three fail.
	poll.MustEvery(t, procEvery, 60*time.Second, "gamma's three items failed", poll.True(func() bool {
		return strings.Contains(httpGet(t, addr, "/api/v1/jobs/gamma?items=true"), `"failed": 3,`)
	}))
	code, body := call(t, "GET", base+"/api/v1/jobs?q=gamma")
	if code != 200 || !strings.Contains(string(body), `"items": {`) {
		t.Errorf("GET /api/v1/jobs?q=gamma: %d, want gamma's items summary\n%s", code, body)
	}
	schemas.check("GET /api/v1/jobs?q=gamma", "#/components/schemas/JobsPage", body)
	code, body = call(t, "GET", base+"/api/v1/jobs/gamma?items=true&offset=1&limit=1")
	if code != 200 || !strings.Contains(string(body), `"item_list": {`) || !strings.Contains(string(body), `"index": 1,`) {
		t.Errorf("GET /api/v1/jobs/gamma?items=true&offset=1&limit=1: %d, want item 1 alone\n%s", code, body)
	}
	schemas.check("GET /api/v1/jobs/gamma?items=true", "#/components/schemas/JobDetail", body)
	code, body = call(t, "GET", base+"/api/v1/jobs/gamma?items=true&limit=501")
	if code != http.StatusBadRequest {
		t.Errorf("GET /api/v1/jobs/gamma?items=true&limit=501: %d, want 400\n%s", code, body)
	}
	schemas.check("GET /api/v1/jobs/gamma?limit=501", "#/components/schemas/Error", body)
	if out, stderr, code := runCLI(t, env, "status"); code != 0 || !strings.Contains(out, "items 3: 0 ok, ") { // failed, unless a tick was skipped since
		t.Errorf("status: exit %d, want gamma's items counted\n%s%s", code, out, stderr)
	}
}

// checkItemOps: a sharded job's runs and trigger, of every item and of one
// (?item=), answer what the document says, and so does the CLI's -o json.
func checkItemOps(t *testing.T, schemas *openAPISchemas, env []string, base string) {
	t.Helper()
	runs, trigger := responseRef("/api/v1/jobs/{name}/runs", "GET", "200"), responseRef("/api/v1/jobs/{name}/trigger", "POST", "200")
	for _, tc := range []struct {
		method, path, ref, want string
		code                    int
	}{
		{"GET", "/api/v1/jobs/delta/runs", runs, `"ticks"`, http.StatusOK},
		{"GET", "/api/v1/jobs/delta/runs?item=us", runs, `"item": "us"`, http.StatusOK},
		{"POST", "/api/v1/jobs/delta/trigger?wait=30s", trigger, `"outcome"`, http.StatusOK},
		{"GET", "/api/v1/jobs/delta/runs", runs, `"succeeded": 3`, http.StatusOK}, // the run waited for
		{"POST", "/api/v1/jobs/delta/trigger", trigger, `"requested": 3`, http.StatusAccepted},
		{"POST", "/api/v1/jobs/delta/trigger?item=eu", trigger, `"item": "eu"`, http.StatusAccepted},
	} {
		code, body := call(t, tc.method, base+tc.path)
		if code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d, want %d with %s\n%s", tc.method, tc.path, code, tc.code, tc.want, body)
		}
		schemas.check(tc.method+" "+tc.path, tc.ref, body)
	}
	for _, args := range [][]string{
		{"history", "delta", "-o", "json"},
		{"history", "delta", "--item", "ap", "-o", "json"},
		{"trigger", "delta", "-o", "json"},
		{"trigger", "delta", "--item", "ap", "-o", "json"},
	} {
		out, stderr, code := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		ref := runs
		if args[0] == "trigger" {
			ref = trigger
		}
		schemas.check(strings.Join(args, " "), ref, []byte(out))
	}
}

// responseRef is the JSON pointer of the schema of a documented response
// (path as the document spells it, {name} and all).
func responseRef(path, method, status string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1", "{", "%7B", "}", "%7D")
	return "#/paths/" + esc.Replace(path) + "/" + strings.ToLower(method) + "/responses/" + status + "/content/application~1json/schema"
}

// checkErrors: the documented errors answer with the documented status
// and body.
func checkErrors(t *testing.T, schemas *openAPISchemas, paths map[string]map[string]apiOperation, base string) {
	t.Helper()
	for _, tc := range []struct{ method, path, status string }{
		{"GET", "/api/v1/jobs/absent/runs", "404"},
		{"POST", "/api/v1/jobs/absent/suspend", "404"},
		{"POST", "/api/v1/jobs/beta/resume", "409"},
		{"POST", "/api/v1/jobs/absent/trigger", "404"},
		{"POST", "/api/v1/jobs/beta/trigger", "409"},
		{"POST", "/api/v1/jobs/alpha/trigger?wait=1y", "400"},
		{"POST", "/api/v1/jobs/gamma/trigger?item=mars", "404"},
		{"POST", "/api/v1/jobs/alpha/trigger?item=0", "400"},
		{"GET", "/api/v1/jobs/gamma/runs?item=mars", "404"},
		{"GET", "/api/v1/jobs/alpha/runs?item=0", "400"},
		{"GET", "/api/v1/jobs?limit=0", "400"},
	} {
		code, body := call(t, tc.method, base+tc.path)
		tmpl := strings.Split(tc.path, "?")[0]
		for _, seg := range []string{"absent", "beta", "alpha", "gamma"} {
			tmpl = strings.Replace(tmpl, "/"+seg+"/", "/{name}/", 1)
		}
		_, found := paths[tmpl][strings.ToLower(tc.method)].Responses[tc.status]
		if !found || http.StatusText(code) == "" || itoa(code) != tc.status {
			t.Errorf("%s %s: %d, want documented %s (documented: %v)", tc.method, tc.path, code, tc.status, found)
			continue
		}
		schemas.check(tc.method+" "+tc.path, responseRef(tmpl, tc.method, tc.status), body)
	}
}

// checkTrigger: POST /api/v1/jobs/alpha/trigger answers 202 with the
// request, and with ?wait 200 with its run; `trigger -o json` prints the
// same fields. alpha runs (and fails) every second; a manual run's outcome
// is recorded either way.
func checkTrigger(t *testing.T, schemas *openAPISchemas, env []string, base string) {
	t.Helper()
	ref := "#/components/schemas/TriggerResult"
	code, body := call(t, "POST", base+"/api/v1/jobs/alpha/trigger")
	if code != http.StatusAccepted {
		t.Errorf("POST trigger: %d, want 202\n%s", code, body)
	}
	schemas.check("POST trigger", ref, body)
	code, body = call(t, "POST", base+"/api/v1/jobs/alpha/trigger?wait=30s")
	if code != http.StatusOK || !strings.Contains(string(body), `"run"`) {
		t.Errorf("POST trigger?wait: %d, want 200 with the run\n%s", code, body)
	}
	schemas.check("POST trigger?wait", ref, body)
	out, stderr, exit := runCLI(t, env, "trigger", "alpha", "-o", "json")
	if exit != 0 {
		t.Fatalf("trigger alpha: exit %d: %s", exit, stderr)
	}
	schemas.check("trigger alpha -o json", ref, []byte(out))
}

func call(t *testing.T, method, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// checkEvents reads the event stream until its first state event and
// checks its data against the State schema.
func checkEvents(t *testing.T, schemas *openAPISchemas, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "state" {
			schemas.check("event state", "#/components/schemas/State", []byte(d))
			return
		}
	}
	t.Errorf("no state event on %s: %v", url, sc.Err())
}
