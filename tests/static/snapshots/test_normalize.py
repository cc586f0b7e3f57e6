from tilelang_golden.static.snapshots.normalize import normalize_cuda


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


# Two reductions' scratch buffers as TileLang 0.1.15 emits them, in the two orders it picks between lowerings:
# declared sorted by name, the first reduction using `{first}`.
WORKSPACES = """\
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* workspace = ((void*)((char*)buf_dyn_shmem + 0));
  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 0));
  void* A_s = ((void*)((char*)buf_dyn_shmem + 1024));
  s[i] = tl::AllReduce<tl::SumOp, 128>::run(s[i], (&(((float*){first})[0])));
  ss[i] = tl::AllReduce<tl::SumOp, 128>::run(ss[i], (&(((float*){second})[0])));
"""


def test_same_named_shared_buffers_are_numbered_by_first_use_whatever_order_tilelang_picked():
    one = WORKSPACES.format(first="workspace_1", second="workspace")
    other = WORKSPACES.format(first="workspace", second="workspace_1")
    assert normalize_cuda(one) == normalize_cuda(other) == other
    # not declaration-sorted either (a rename alone): still the same canonical text
    unsorted = one.replace("workspace_1", "#").replace("workspace", "workspace_1").replace("#", "workspace")
    assert normalize_cuda(unsorted) == other


def test_same_named_buffers_at_different_offsets_get_their_offsets_as_a_set():
    """The planner's tie decides which reduction's buffer gets the lone offset (flash attention on gfx950):
    both plans give one text, with the offsets ascending in the canonical names' order."""
    lone_offset = (
        "workspace_1 = ((void*)((char*)buf_dyn_shmem + 0)",
        "workspace_1 = ((void*)((char*)buf_dyn_shmem + 512)",
    )
    one = WORKSPACES.format(first="workspace_1", second="workspace").replace(*lone_offset)
    other = WORKSPACES.format(first="workspace", second="workspace_1").replace(*lone_offset)
    canonical = normalize_cuda(one)
    assert canonical == normalize_cuda(other)
    assert "void* workspace = ((void*)((char*)buf_dyn_shmem + 0));" in canonical
    assert "void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 512));" in canonical
    # a change to the set still shows
    assert normalize_cuda(one.replace("+ 512", "+ 1024")) != canonical


def test_a_groups_offsets_ascend_by_value_not_as_text():
    """512 before 1024, though "1024" sorts first as text."""

    def placed(workspace: int, workspace_1: int) -> str:
        text = WORKSPACES.format(first="workspace", second="workspace_1")
        for name, offset in (("workspace", workspace), ("workspace_1", workspace_1)):
            text = text.replace(
                f"{name} = ((void*)((char*)buf_dyn_shmem + 0)", f"{name} = ((void*)((char*)buf_dyn_shmem + {offset})"
            )
        return text

    canonical = normalize_cuda(placed(1024, 512))
    assert canonical == normalize_cuda(placed(512, 1024))
    assert "void* workspace = ((void*)((char*)buf_dyn_shmem + 512));" in canonical
    assert "void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 1024));" in canonical


def test_uniquely_named_shared_buffers_are_untouched():
    text = "  void* A_s = ((void*)((char*)buf_dyn_shmem + 0));\n  x = A_s;\n"
    assert normalize_cuda(text) == text
