package ompwait

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestEnviron(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		needed bool
	}{
		{"nothing set", []string{"PATH=/bin", "HOME=/root"}, true},
		{"empty environment", nil, true},
		{"policy chosen", []string{"PATH=/bin", "OMP_WAIT_POLICY=active"}, false},
		{"spin count chosen", []string{"GOMP_SPINCOUNT=1000"}, false},
		{"empty value is a choice", []string{"OMP_WAIT_POLICY="}, false},
		{"similar names do not count", []string{"OMP_WAIT_POLICY_X=active", "XGOMP_SPINCOUNT=0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			got, needed := Environ(in)
			if needed != tc.needed {
				t.Fatalf("needed = %v, want %v", needed, tc.needed)
			}
			if !slices.Equal(in, tc.env) {
				t.Errorf("Environ changed its argument: %q", in)
			}
			want := tc.env
			if tc.needed {
				want = append(slices.Clone(tc.env), "OMP_WAIT_POLICY=passive")
			}
			if !slices.Equal(got, want) {
				t.Errorf("Environ = %q, want %q", got, want)
			}
		})
	}
}

// TestReexec runs this test binary as a child that calls Reexec and prints what its
// re-executed self sees.
func TestReexec(t *testing.T) {
	if os.Getenv("OMPWAIT_CHILD") == "1" {
		if err := Reexec(); err != nil {
			t.Fatal(err)
		}
		// Marks the line of the run that got here, with the policy it started with.
		os.Stdout.WriteString("child policy=" + os.Getenv("OMP_WAIT_POLICY") + " args=" + strings.Join(os.Args[1:], " ") + "\n")
		return
	}
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"unset: re-executed with passive", "", "child policy=passive"},
		{"set: left alone", "OMP_WAIT_POLICY=active", "child policy=active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReexec$", "-test.count=1")
			var env []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				if name != "OMP_WAIT_POLICY" && name != "GOMP_SPINCOUNT" {
					env = append(env, kv)
				}
			}
			env = append(env, "OMPWAIT_CHILD=1")
			if tc.extra != "" {
				env = append(env, tc.extra)
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var lines []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "child policy=") {
					lines = append(lines, l)
				}
			}
			// Exactly one run reaches the end: the re-executed one (or the only one).
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want+" ") || !strings.Contains(lines[0], "-test.run=^TestReexec$") {
				t.Errorf("child printed %q, want one line starting %q with the same arguments\n%s", lines, tc.want, out)
			}
		})
	}
}
