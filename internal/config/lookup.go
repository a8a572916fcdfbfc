package config

import (
	"fmt"
	"strings"
)

// Class returns the class with the given name.
func (c *Config) Class(name string) (*Class, bool) {
	for i := range c.Classes {
		if c.Classes[i].Name == name {
			return &c.Classes[i], true
		}
	}
	return nil, false
}

// ClassOfNode returns the class whose node names include node ("<class>-<n>").
func (c *Config) ClassOfNode(node string) (*Class, bool) {
	i := strings.LastIndexByte(node, '-')
	if i <= 0 {
		return nil, false
	}
	cl, ok := c.Class(node[:i])
	if !ok {
		return nil, false
	}
	var n int
	if _, err := fmt.Sscanf(node[i+1:], "%d", &n); err != nil || fmt.Sprint(n) != node[i+1:] || n < 1 || n > cl.MaxNodes {
		return nil, false
	}
	return cl, true
}

// NodeNames is the hostlist expression of a class's nodes, e.g. "a10g-[1-16]".
func (cl *Class) NodeNames() string {
	if cl.MaxNodes == 1 {
		return cl.Name + "-1"
	}
	return fmt.Sprintf("%s-[1-%d]", cl.Name, cl.MaxNodes)
}

// Budget returns the monthly cap of an account, if any.
func (c *Config) Budget(account string) (float64, bool) {
	for _, b := range c.Budgets {
		if b.Account == account {
			return b.MonthlyUSD, true
		}
	}
	return 0, false
}

// BudgetOf returns an account's budget, on_unknown filled in.
func (c *Config) BudgetOf(account string) (Budget, bool) {
	for _, b := range c.Budgets {
		if b.Account == account {
			if b.OnUnknown == "" {
				b.OnUnknown = OnUnknownHold
			}
			return b, true
		}
	}
	return Budget{}, false
}

// Line returns the line of a YAML path such as "classes[0].max_nodes" in the
// loaded file, or 0 when unknown.
func (c *Config) Line(path string) int { return c.lines[path] }
