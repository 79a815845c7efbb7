package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeMermaid draws g as a Mermaid flowchart, which GitHub renders where
// Markdown shows it:
//
//   - a store is a box, a view's box pointing at the store it is a view
//     of ("view of"); a sharded store is a parallelogram;
//   - a controller is a rounded box, with "reconciles" to its primary
//     store and "watches" to each secondary one;
//   - a hosted operator is a hexagon, with "reads" to each store it asked
//     for;
//   - a consumer, the function that asked for stores, is a plain label
//     with "asks for" to each.
func (g Graph) writeMermaid(w io.Writer) {
	fmt.Fprintln(w, "flowchart LR")
	ids := map[string]string{} // store key → node id
	for i, s := range g.Stores {
		ids[s.Key] = fmt.Sprintf("s%d", i)
		label := s.Key
		if s.Late {
			label += " (started late)"
		}
		fmt.Fprintf(w, "  %s[%s]\n", ids[s.Key], mermaidLabel(label))
	}
	if sh := g.Sharding; sh != nil {
		for i, s := range sh.Stores {
			id := fmt.Sprintf("x%d", i)
			ids[s.Key] = id
			fmt.Fprintf(w, "  %s[/%s/]\n", id, mermaidLabel(s.Key+" sharded by "+s.ShardKey))
		}
	}
	for _, s := range g.Stores {
		if s.ViewOf != "" {
			fmt.Fprintf(w, "  %s -. view of .-> %s\n", ids[s.Key], ids[s.ViewOf])
		}
	}
	for i, c := range g.Controllers {
		id := fmt.Sprintf("c%d", i)
		fmt.Fprintf(w, "  %s(%s)\n", id, mermaidLabel("controller "+c.Name))
		fmt.Fprintf(w, "  %s -- reconciles --> %s\n", id, ids[c.Primary])
		for _, s := range c.Secondary {
			fmt.Fprintf(w, "  %s -. watches .-> %s\n", id, ids[s])
		}
	}
	hosted := map[string]string{} // operator name → node id
	for i, h := range g.Hosted {
		hosted[h.Name] = fmt.Sprintf("h%d", i)
		fmt.Fprintf(w, "  %s{{%s}}\n", hosted[h.Name], mermaidLabel("hosted operator "+h.Name))
	}
	var consumers []string
	for _, s := range g.Stores {
		for _, c := range s.Consumers {
			if _, ok := hosted[c]; !ok && !slices.Contains(consumers, c) {
				consumers = append(consumers, c)
			}
		}
	}
	for i, c := range consumers {
		fmt.Fprintf(w, "  m%d>%s]\n", i, mermaidLabel(c))
	}
	for _, s := range g.Stores {
		for _, c := range s.Consumers {
			if id, ok := hosted[c]; ok {
				fmt.Fprintf(w, "  %s -- reads --> %s\n", id, ids[s.Key])
				continue
			}
			fmt.Fprintf(w, "  m%d -- asks for --> %s\n", slices.Index(consumers, c), ids[s.Key])
		}
	}
}

// mermaidLabel quotes s as a Mermaid node label.
func mermaidLabel(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, "#quot;") + `"`
}
