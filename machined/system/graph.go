package system

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// checkGraph verifies that every dependency names a service and that the
// dependencies form no cycle; a cycle is reported as its path.
func checkGraph(deps map[string][]string) error {
	for _, id := range slices.Sorted(maps.Keys(deps)) {
		for _, d := range deps[id] {
			if _, ok := deps[d]; !ok {
				return fmt.Errorf("system: service %q depends on unknown service %q", id, d)
			}
		}
	}

	const (
		unvisited = iota
		visiting
		done
	)

	mark := map[string]int{}

	var path []string

	var visit func(id string) error
	visit = func(id string) error {
		switch mark[id] {
		case done:
			return nil
		case visiting:
			start := slices.Index(path, id)

			return fmt.Errorf("system: dependency cycle: %s", strings.Join(append(path[start:], id), " -> "))
		}

		mark[id] = visiting
		path = append(path, id)

		for _, d := range deps[id] {
			if err := visit(d); err != nil {
				return err
			}
		}

		path = path[:len(path)-1]
		mark[id] = done

		return nil
	}

	for _, id := range slices.Sorted(maps.Keys(deps)) {
		if err := visit(id); err != nil {
			return err
		}
	}

	return nil
}

// startOrder lists the services so that each comes after its dependencies;
// ties keep alphabetical order, so the order is stable. The graph must be
// acyclic.
func startOrder(deps map[string][]string) []string {
	var order []string

	placed := map[string]bool{}

	var place func(id string)
	place = func(id string) {
		if placed[id] {
			return
		}

		placed[id] = true

		for _, d := range slices.Sorted(slices.Values(deps[id])) {
			place(d)
		}

		order = append(order, id)
	}

	for _, id := range slices.Sorted(maps.Keys(deps)) {
		place(id)
	}

	return order
}
