package handlers_test

import (
	"testing"

	"videogen/internal/testkit"
)

func TestListModels(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "0")
	r := s.Do(t, "GET", "/v1/models", acct.Key, nil)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	data := m["data"].([]any)
	want := []struct{ id, series, res, price, r169, r916, r219 string }{
		{"videogen-2.0-480p", "Standard", "480p", "0.150000", "864x496", "496x864", "992x432"},
		{"videogen-2.0-720p", "Standard", "720p", "0.300000", "1280x720", "720x1280", "1470x630"},
		{"videogen-2.0-1080p", "Standard", "1080p", "0.700000", "1920x1080", "1080x1920", "2206x946"},
		{"videogen-2.0-fast-480p", "Fast", "480p", "0.100000", "864x496", "496x864", "992x432"},
		{"videogen-2.0-fast-720p", "Fast", "720p", "0.200000", "1280x720", "720x1280", "1470x630"},
		{"videogen-2.0-fast-1080p", "Fast", "1080p", "0.450000", "1920x1080", "1080x1920", "2206x946"},
		{"videogen-2.0-mini-480p", "Mini", "480p", "0.050000", "864x496", "496x864", "992x432"},
		{"videogen-2.0-mini-720p", "Mini", "720p", "0.100000", "1280x720", "720x1280", "1470x630"},
	}
	if m["object"] != "list" || len(data) != len(want) {
		t.Fatalf("got %d models: %s", len(data), r.Body)
	}
	for i, w := range want {
		d := data[i].(map[string]any)
		sizes := d["sizes"].(map[string]any)
		if d["id"] != w.id || d["object"] != "model" || d["series"] != w.series || d["resolution"] != w.res || d["price_per_second"] != w.price ||
			sizes["16:9"] != w.r169 || sizes["9:16"] != w.r916 || sizes["21:9"] != w.r219 || len(sizes) != 6 || d["owned_by"] != "videogen" {
			t.Errorf("model %d = %v, want %+v", i, d, w)
		}
	}
}
