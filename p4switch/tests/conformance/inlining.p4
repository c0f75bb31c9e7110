/* Inlined code as p4c lowers it: early returns in functions, in directly called actions and in applied
 * sub-controls; a sub-control applied twice; arguments bound in a table's actions list; run-time `/` and
 * `%` by powers of two; named arguments; a digest of a list; default parameter values; a control applied
 * by its type name; an extern instance passed to a sub-control; constructor parameters of sub-controls and
 * of a pipeline block; a table keyed on an error. Expected outputs are BMv2's. */
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
header t_t { bit<8> op; bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct headers_t { eth_t eth; t_t t; }
struct meta_t { bit<8> m; }
struct pair_t { bit<8> x; bit<8> y; }

// the value of the first return that runs
bit<8> classify(in bit<8> x) {
    if (x == 0) {
        return 8w10;
    }
    bit<8> y = x;
    if (x < 8w16) {
        if (x[0:0] == 1) {
            return 8w11;
        }
        y = y + 1;
    }
    return y + 8w100;
}

// a header returned from a nested branch
t_t make(in bit<8> k) {
    if (k == 1) {
        if (k != 0) {
            return { 8w1, 8w2, 8w3, 8w4, 8w5, 8w6 };
        }
    }
    return { 8w9, 8w9, 8w9, 8w9, 8w9, 8w9 };
}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x;
}

// a void function that returns early: x is copied out either way
void clamp(inout bit<8> x) {
    x = x + 1;
    if (x < 8w200) {
        return;
    }
    x = 8w200;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        pk.extract(hdr.t);
        transition accept;
    }
}

// returns early; applied twice, on other arguments each time
control Step(inout bit<8> v, in bit<8> by) {
    apply {
        if (by == 0) {
            return;
        }
        v = v + by;
        if (v > 8w100) {
            v = 8w100;
            return;
        }
        v = v | 8w0x80;
    }
}

// k has a default; the register is the caller's
control Keep(inout t_t t, register<bit<8>> r, in pair_t p, in bit<8> k = 8w7) {
    apply {
        r.write(1, t.a + p.x);
        r.read(t.e, 1);
        t.d = p.y + k;
    }
}

// constructor parameters: one instance per set of values
control AddTo(inout bit<8> v)(bit<8> amount, bool twice) {
    apply {
        v = v + amount;
        if (twice) {
            v = v + amount;
        }
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Step() step;
    Keep() keep;
    Keep() keep2;
    AddTo(8w1, false) add_one;
    AddTo(8w16, true) add_32;
    register<bit<8>>(4) reg;

    action with_default(out bit<8> x, in bit<8> y = 8w5) {
        x = y + 8w1;
    }

    // a return ends the action; its inout parameter is still copied out
    action early(inout bit<8> v, in bit<8> k) {
        v = 8w1;
        if (k == 1) {
            return;
        }
        v = 8w2;
        if (k >= 2) {
            if (k == 2) {
                return;
            }
        }
        v = 8w3;
    }

    // v is bound in the actions list, d is action data; a return still copies v out
    action add_bound(inout bit<8> v, bit<8> d) {
        v = v + d;
        if (d == 0) {
            v = 8w77;
            return;
        }
        v = v + 8w1;
    }
    action drop_bound(inout standard_metadata_t s) {
        mark_to_drop(s);
    }
    table bound_t {
        key = { hdr.t.a: exact; }
        actions = { add_bound(hdr.t.c); drop_bound(sm); }
        const entries = {
            8w1: add_bound(hdr.t.c, 8w5);
            8w2: add_bound(hdr.t.c, 8w0);
            8w3: drop_bound(sm);
        }
        default_action = add_bound(hdr.t.c, 8w50);
    }

    // the bound argument is a call: evaluated each time the action runs
    action note(in bit<8> x, bit<8> d) {
        hdr.t.e = x + d;
    }
    table call_t {
        key = { hdr.t.a: exact; }
        actions = { note(classify(hdr.t.b)); }
        default_action = note(classify(hdr.t.b), 8w1);
    }

    // keyed on an error (p4c allows no const entries for it; the control plane's are numbers)
    action note_error(bit<16> v) {
        hdr.eth.type_ = v;
    }
    table error_t {
        key = { sm.parser_error: exact; }
        actions = { note_error; }
        default_action = note_error(16w0xee);
    }

    apply {
        sm.egress_spec = 1;
        if (!hdr.t.isValid()) {
            error_t.apply();
        }
        if (hdr.t.op == 1) {
            hdr.t.c = classify(hdr.t.a);
            hdr.t.d = classify(hdr.t.b);
            clamp(hdr.t.e);
        } else if (hdr.t.op == 2) {
            hdr.t = make(hdr.t.a);
        } else if (hdr.t.op == 3) {
            early(hdr.t.c, hdr.t.a);
            early(hdr.t.d, hdr.t.b);
        } else if (hdr.t.op == 4) {
            step.apply(hdr.t.c, hdr.t.a);
            step.apply(hdr.t.d, hdr.t.b);
        } else if (hdr.t.op == 5) {
            bound_t.apply();
        } else if (hdr.t.op == 6) {
            call_t.apply();
        } else if (hdr.t.op == 7) {
            hdr.t.c = hdr.t.a / 8w4;
            hdr.t.d = hdr.t.a % 8w8;
            hdr.t.e = 8w0 / bump(hdr.t.b);
        } else if (hdr.t.op == 8) {
            early(k = hdr.t.a, v = hdr.t.c);
            digest(1, { hdr.t.a, hdr.eth.type_ });
        } else if (hdr.t.op == 9) {
            with_default(hdr.t.c);
            pair_t pr = { 8w3, 8w4 };
            keep.apply(hdr.t, reg, pr);
            Step.apply(hdr.t.b, 8w1);
        } else if (hdr.t.op == 10) {
            pair_t pr2 = { 8w10, 8w20 };
            keep2.apply(hdr.t, reg, pr2, 8w1);
        } else if (hdr.t.op == 11) {
            add_one.apply(hdr.t.c);
            add_32.apply(hdr.t.d);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm)(bit<8> mark) {
    apply {
        if (hdr.t.op == 11) {
            hdr.t.e = mark;
        }
    }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr.eth);
        pk.emit(hdr.t);
    }
}

V1Switch(p = P(), vr = V(), ig = I(), eg = E(8w0x5a), ck = C(), dep = D()) main;
