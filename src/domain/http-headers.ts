/**
 * Which header names and values HTTP/1.1 can carry (RFC 9110 §5.1, §5.5), as the sink client
 * writes them: a name is a token; a value has no control character but tab, and every character
 * is one latin1 byte on the wire. Pure: the endpoint save and the sink client ask the same rule,
 * so nothing is saved that every call would then refuse.
 */

const NAME = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/

/** A header name HTTP allows (a token). */
export const validName = (name: string): boolean => NAME.test(name)

/** A header value HTTP allows (no control character but tab; latin1: one byte a character on the wire). */
export const validValue = (value: string): boolean => !INVALID_VALUE.test(value)
