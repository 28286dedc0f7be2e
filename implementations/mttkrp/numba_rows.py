"""LLVM-level helpers for Numba kernels that gather factor rows (``numba-csf``).

Numba leaves the rank loop of ``acc[r] += x * U[b, r]`` to LLVM's loop vectorizer, which, with
the rank a runtime value, picks vectors of 8 with 4 interleaved for 32 columns and more, so a
rank of 16 runs in its remainder loop, and checks per nonzero that the sum and the row do not
overlap. ``fiber_sum`` writes the fiber loop in LLVM IR instead, over a fixed number of columns
held in one vector register set (``<16 x double>``: two AVX-512 registers, four AVX2 or eight
NEON ones; LLVM splits it for the target), so the sum never leaves the registers inside a
fiber. Measured in ``mttkrp/EXPERIMENTS.md``.

Numba's on-disk cache of a kernel that calls these is keyed on the kernel's own source file: after
editing this one, delete that file's ``__pycache__/*.nbi`` entries.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils, errors
from numba.extending import intrinsic

WIDTHS = (16, 8, 1)  # columns per sum, widest first (1: what a rank that is not a multiple of 8 leaves)


@intrinsic
def prefetch_row(typingctx, matrix, row):
    """Ask the CPU to start loading row ``row`` of a C-contiguous matrix (its first and last
    entries: a row of 16 float64 spans two or three cache lines)."""
    def codegen(context, builder, signature, args):
        matrix_type, row_type = signature.args
        array = context.make_array(matrix_type)(context, builder, args[0])
        index = context.cast(builder, args[1], row_type, types.intp)
        last = builder.sub(builder.extract_value(array.shape, 1), context.get_constant(types.intp, 1))
        i8_pointer, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8_pointer, i32, i32, i32]), "llvm.prefetch.p0")
        for column in (context.get_constant(types.intp, 0), last):
            pointer = cgutils.get_item_pointer(context, builder, matrix_type, array, [index, column])
            builder.call(prefetch, [builder.bitcast(pointer, i8_pointer), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()

    return types.void(matrix, row), codegen


def _require_rows(name: str, *matrices: types.Array) -> None:
    """The vector loads read ``width`` adjacent entries of a row: only C-contiguous matrices have them."""
    if any(not isinstance(m, types.Array) or m.layout != "C" for m in matrices):
        raise errors.TypingError(f"{name} needs C-contiguous float64 matrices, got {matrices}")


def _fiber_sum(width: int) -> Any:
    """The intrinsic ``f(paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc,
    parent, column)``: with ``s`` the sum over leaves j in start..stop-1 of values[j]
    U_leaf(leaf_ids[j], c) (times U_pair(pair_ids[j], c) if ``paired``) for columns c = column ..
    column + width - 1, ``acc[parent, c] += s * U(k, c)``, or ``+= s`` if k < 0."""
    def typer(typingctx, paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc, parent, column):
        _require_rows(f"fiber_sum{width}", u_leaf, u_pair, u, acc)
        signature = types.void(paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc, parent,
                               column)

        def codegen(context, builder, signature, args):
            arrays = [context.make_array(t)(context, builder, a) if isinstance(t, types.Array) else a
                      for t, a in zip(signature.args, args)]
            paired_t, values_t, ids_t, leaf_t, pair_ids_t, pair_t = signature.args[:6]
            u_t, acc_t = signature.args[8], signature.args[10]
            start_v, stop_v, k_v, parent_v, column_v = (context.cast(builder, args[i], signature.args[i], types.intp)
                                                        for i in (6, 7, 9, 11, 12))
            vector = ir.VectorType(ir.DoubleType(), width)
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vector, [vector] * 3), f"llvm.fma.v{width}f64")
            intp = context.get_value_type(types.intp)

            def load_row(matrix_t, matrix, row):
                pointer = cgutils.get_item_pointer(context, builder, matrix_t, matrix, [row, column_v])
                return builder.load(builder.bitcast(pointer, vector.as_pointer()), align=8)

            def gathered_row(ids_type, ids, matrix_t, matrix, j):
                row = builder.load(cgutils.get_item_pointer(context, builder, ids_type, ids, [j]))
                return load_row(matrix_t, matrix, context.cast(builder, row, ids_type.dtype, types.intp))

            def leaf_loop(two_rows: bool) -> None:
                lanes = ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width)
                with cgutils.for_range_slice(builder, start_v, stop_v, ir.Constant(intp, 1), intp) as (j, _):
                    x = builder.load(cgutils.get_item_pointer(context, builder, values_t, arrays[1], [j]))
                    x = builder.shuffle_vector(builder.insert_element(ir.Constant(vector, ir.Undefined), x,
                                                                      ir.IntType(32)(0)),
                                               ir.Constant(vector, ir.Undefined), lanes)
                    if two_rows:
                        x = builder.fmul(x, gathered_row(pair_ids_t, arrays[4], pair_t, arrays[5], j))
                    row = gathered_row(ids_t, arrays[2], leaf_t, arrays[3], j)
                    builder.store(builder.call(fma, [x, row, builder.load(total)]), total)

            total = cgutils.alloca_once_value(builder, ir.Constant(vector, [0.0] * width))  # kept in registers
            is_paired = context.cast(builder, args[0], paired_t, types.boolean)
            with builder.if_else(is_paired) as (then, otherwise):
                with then:
                    leaf_loop(True)
                with otherwise:
                    leaf_loop(False)
            with builder.if_then(builder.icmp_signed(">=", k_v, ir.Constant(intp, 0))):
                builder.store(builder.fmul(builder.load(total), load_row(u_t, arrays[8], k_v)), total)
            target = cgutils.get_item_pointer(context, builder, acc_t, arrays[10], [parent_v, column_v])
            target = builder.bitcast(target, vector.as_pointer())
            builder.store(builder.fadd(builder.load(target, align=8), builder.load(total)), target, align=8)
            return context.get_dummy_value()

        return signature, codegen

    typer.__name__ = f"fiber_sum{width}"
    return intrinsic(typer)


def _close_row(width: int) -> Any:
    """The intrinsic ``f(acc, level, u, k, column)``: for columns c = column .. column + width - 1,
    ``acc[level - 1, c] += acc[level, c] * U(k, c)`` and ``acc[level, c] = 0`` (a finished node's
    sum into its parent's)."""
    def typer(typingctx, acc, level, u, k, column):
        _require_rows(f"close_row{width}", acc, u)
        signature = types.void(acc, level, u, k, column)

        def codegen(context, builder, signature, args):
            acc_t, u_t = signature.args[0], signature.args[2]
            acc_a = context.make_array(acc_t)(context, builder, args[0])
            u_a = context.make_array(u_t)(context, builder, args[2])
            level_v, k_v, column_v = (context.cast(builder, args[i], signature.args[i], types.intp) for i in (1, 3, 4))
            vector = ir.VectorType(ir.DoubleType(), width)

            def pointer(t, a, row):
                item = cgutils.get_item_pointer(context, builder, t, a, [row, column_v])
                return builder.bitcast(item, vector.as_pointer())

            node, parent = pointer(acc_t, acc_a, level_v), pointer(acc_t, acc_a, builder.sub(level_v, level_v.type(1)))
            product = builder.fmul(builder.load(node, align=8), builder.load(pointer(u_t, u_a, k_v), align=8))
            builder.store(builder.fadd(builder.load(parent, align=8), product), parent, align=8)
            builder.store(ir.Constant(vector, [0.0] * width), node, align=8)
            return context.get_dummy_value()

        return signature, codegen

    typer.__name__ = f"close_row{width}"
    return intrinsic(typer)


close_row16, close_row8, close_row1 = (_close_row(w) for w in WIDTHS)
fiber_sum16, fiber_sum8, fiber_sum1 = (_fiber_sum(w) for w in WIDTHS)
