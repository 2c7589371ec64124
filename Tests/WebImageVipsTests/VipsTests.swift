import Testing
import WebImageTestSupport

/// Every libvips suite, one test at a time. libvips work is synchronous and each
/// test holds a thread of Swift's cooperative pool while it runs (two on a 2-core
/// machine); run in parallel they could take both, and starve the timing-bounded
/// async tests of the other targets.
@Suite("libvips", .offCooperativePool, .serialized)
enum VipsTests {}
