package fxcontroller_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/fxcontroller"
)

// --controllers takes kube-controller-manager's syntax: "*", names and
// "-name"; a name is a controller's, its module package's or a hosted
// operator's, and leaving out wins.
func TestSelection(t *testing.T) {
	tests := []struct {
		give    []string
		names   [][]string // each: a controller's name, then its package's
		want    []bool
		wantErr string
	}{
		{give: nil, names: [][]string{{"a", "pkg"}}, want: []bool{true}},
		{give: []string{"*"}, names: [][]string{{"a", "pkg"}}, want: []bool{true}},
		{give: []string{"*", "-a"}, names: [][]string{{"a", "pkg"}, {"b", "pkg"}}, want: []bool{false, true}},
		{give: []string{"*", "-pkg"}, names: [][]string{{"a", "pkg"}, {"b", "other"}}, want: []bool{false, true}},
		{give: []string{"a"}, names: [][]string{{"a", "pkg"}, {"b", "pkg"}}, want: []bool{true, false}},
		{give: []string{"pkg"}, names: [][]string{{"a", "pkg"}, {"b", "other"}}, want: []bool{true, false}},
		{give: []string{"pkg", "-a"}, names: [][]string{{"a", "pkg"}, {"b", "pkg"}}, want: []bool{false, true}},
		{give: []string{""}, wantErr: `--controllers: "" is not "*", a controller's name or "-" and a name`},
		{give: []string{"-*"}, wantErr: `"-*" is not`},
		{give: []string{"-"}, wantErr: `"-" is not`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.give, ","), func(t *testing.T) {
			sel, err := fxcontroller.Select(tt.give...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for i, names := range tt.names {
				assert.Equal(t, tt.want[i], sel.Enabled(names...), "%q", names)
			}
		})
	}
	sel, err := fxcontroller.Select("*", "-mirror")
	require.NoError(t, err)
	assert.Equal(t, "*,-mirror", sel.String())
	assert.Equal(t, "*", fxcontroller.Selection{}.String())
}
