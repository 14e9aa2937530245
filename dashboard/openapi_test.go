package dashboard

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fullConfig is a Config with every field set to a stub, so that New
// registers every route the package has, including routes added later
// through new Config fields.
func fullConfig(t *testing.T) Config {
	t.Helper()
	var cfg Config
	v := reflect.ValueOf(&cfg).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Func:
			ft := f.Type()
			f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, ft.NumOut())
				for j := range out {
					out[j] = reflect.Zero(ft.Out(j))
				}
				return out
			}))
		case reflect.Interface:
			if !reflect.TypeFor[http.Handler]().AssignableTo(f.Type()) {
				t.Fatalf("Config.%s: an interface the test cannot stub", v.Type().Field(i).Name)
			}
			f.Set(reflect.ValueOf(http.NotFoundHandler()))
		case reflect.String: // a setting, not a route
		default:
			t.Fatalf("Config.%s: a field kind the test cannot stub (%s)", v.Type().Field(i).Name, f.Kind())
		}
	}
	return cfg
}

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// TestOpenAPIMatchesRoutes: every route New can register is in the
// OpenAPI document, and every operation the document lists is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	routes, err := Routes(fullConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var registered, documented []string
	for _, r := range routes {
		method, path, ok := strings.Cut(r, " ")
		if !ok {
			t.Errorf("route %q has no method: every route names the one it serves", r)
			continue
		}
		registered = append(registered, method+" "+strings.TrimSuffix(path, "{$}"))
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in dashboard/openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("openapi.json documents %s, which no handler serves", d)
		}
	}
}
