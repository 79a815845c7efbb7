package share

import (
	"reflect"
)

// Bytes estimates the heap that n objects the table took take: each
// object's own struct, and its share of the parts the pool holds, once
// each. A pool of one table counts all its parts; several share them out
// by how many objects each holds. Parts no object holds any more count
// until the next rebuild: the pool keeps them alive until then.
func (t *Table) Bytes(n int) int64 {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	parts := pl.bytes
	if len(pl.tables) > 1 {
		parts = pl.bytes * int64(n) / int64(max(pl.objects, 1))
	}
	return int64(n)*pl.rootSize + parts
}

// PartsBytes estimates the heap of the parts the pool holds, for all its
// tables.
func (t *Table) PartsBytes() int64 {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.bytes
}

// Size estimates the heap obj, a pointer, takes when it shares nothing:
// its struct and every part it reaches, each counted where it is reached.
func Size(obj any) int64 {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	return int64(v.Elem().Type().Size()) + sizeBelow(v.Elem())
}

// sizeBelow sums the parts v reaches, not v itself.
func sizeBelow(v reflect.Value) int64 {
	var n int64
	switch v.Kind() {
	case reflect.String:
		n = int64(v.Len())
	case reflect.Struct:
		for i := range v.NumField() {
			n += sizeBelow(v.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			n += sizeBelow(v.Index(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			n = partBytes(v) + sizeBelow(v.Elem())
		}
	case reflect.Slice:
		n = partBytes(v)
		for i := range v.Len() {
			n += sizeBelow(v.Index(i))
		}
	case reflect.Map:
		n = partBytes(v)
		for it := v.MapRange(); it.Next(); {
			n += sizeBelow(it.Key()) + sizeBelow(it.Value())
		}
	case reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			n = int64(e.Type().Size()) + sizeBelow(e)
		}
	}
	return n
}

// partBytes estimates the bytes a pointer, slice or map holds itself,
// without what its elements reach.
func partBytes(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.Pointer:
		return int64(v.Type().Elem().Size())
	case reflect.Slice:
		return int64(v.Cap()) * int64(v.Type().Elem().Size())
	case reflect.Map:
		if v.IsNil() {
			return 0
		}
		// A Go map keeps slots in groups of 8, with a control word, at
		// most 7/8 full, behind a header.
		const header, slots = 48, 8
		slot := int64(v.Type().Key().Size() + v.Type().Elem().Size())
		groups := (int64(v.Len())*8/7)/slots + 1
		return header + groups*(8+slots*slot)
	}
	return 0
}

// What the table's index takes per entry: a map slot of 32 bytes, at
// three quarters full.
const (
	stringIndexBytes = 43
	partIndexBytes   = 43
)
