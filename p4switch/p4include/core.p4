/* p4switch's own core.p4: the P4_16 core library declarations (P4_16 spec, section "P4 core library"). */
// p4c's include guard, which programs test (#ifdef _CORE_P4_)
#ifndef _CORE_P4_
#define _CORE_P4_

/* Standard errors raised by the parser and by verify(). */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet a parser reads. */
extern packet_in {
    void extract<T>(out T hdr);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

/* The packet a deparser writes. */
extern packet_out {
    void emit<T>(in T hdr);
}

/* Rejects the packet with toSignal when check is false (parsers only). */
extern void verify(in bool check, in error toSignal);

/* Stops the compilation with the message when check is false; true otherwise (a compile-time check). */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

/* The action every table falls back to by default. */
@noWarn("unused")
action NoAction() { }

match_kind {
    exact,
    ternary,
    lpm
}

#endif
