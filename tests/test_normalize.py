from harness.static.normalize import normalize_cuda


def test_line_directives_are_dropped_unless_asked_for():
    text = '#line 12 "/home/u/kernels/gemm.py"\nint x;\n'
    assert normalize_cuda(text) == "int x;\n"
    assert normalize_cuda(text, keep_line_directives=True).startswith('#line 12 "<path>"')


def test_crlf_and_missing_final_newline():
    assert normalize_cuda("a\r\nb\rc") == "a\nb\nc\n"
    assert normalize_cuda("a\n\n\n") == "a\n"


def test_absolute_paths_are_replaced():
    text = "// from /usr/lib/python3/site-packages/tilelang/src/tl_templates/cuda/gemm.h\n// /tmp/xyz/a.cu\n"
    out = normalize_cuda(text)
    assert "<site-packages>/tilelang/src/tl_templates/cuda/gemm.h" in out
    assert "/tmp" not in out and "/usr" not in out


def test_include_paths_and_code_are_untouched():
    text = "#include <tl_templates/cuda/gemm.h>\nx = a / b;  \n"
    assert normalize_cuda(text) == "#include <tl_templates/cuda/gemm.h>\nx = a / b;\n"


def test_idempotent():
    text = '#line 1 "/root/x.py"\r\nfoo(); \n'
    once = normalize_cuda(text)
    assert normalize_cuda(once) == once
