"""fastvideo_kernel.vmoba: MoBA attention, not implemented by vsa (each raises vsa.UnsupportedError)."""

from vsa.compat.fastvideo_kernel._unsupported import unsupported_function

moba_attn_varlen = unsupported_function("vmoba", "moba_attn_varlen")
process_moba_input = unsupported_function("vmoba", "process_moba_input")
process_moba_output = unsupported_function("vmoba", "process_moba_output")
