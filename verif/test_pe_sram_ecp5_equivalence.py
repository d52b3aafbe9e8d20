"""The PE's DP16KD forms (elaborated for the ECP5) read what its simulated form reads, cycle for cycle.

Icarus runs the simulated form and a DP16KD form (the output register in the fabric, the default, or in the
block) of a :class:`~trainforge.hw.caterpillar.pe.CPPE` side by side on the same random
stimulus and compares ``mem_data`` (the SRAM output register's word) in every cycle. The addresses come from a
few words, so reads of the address written in the same cycle (the simulated memory returns the old word) and
in the cycle before (the new word) happen often; the testbench counts both and the test requires each.

Yosys has no simulation model of the DP16KD, so :data:`DP16KD_MODEL` is this file's own, of the subset
the PE uses, written from Lattice's description of the block (FPGA-TN-02204, ECP5 memory usage guide), not
from the generator: a word of ``DATA_WIDTH`` bits at ``AD13 .. AD<lowest>`` (x18: ``AD4``, with ``AD1`` and
``AD0`` the write byte enables; x9: ``AD3``; x4: ``AD2``; x2: ``AD1``; x1: ``AD0``) on ``DI``/``DO``'s low
bits; ``CE`` enables the read latch, ``OCE`` the output register (``REGMODE OUTREG``), ``RST`` clears both
(synchronous); a read of the address the other port writes at the same clock edge gives ``x``. It checks the
write registers, the bypass and the word slicing of the generator; it cannot check that model against the
silicon.
"""
import random
import shutil
import subprocess

import pytest
from amaranth.back import verilog

from trainforge.hw.caterpillar.pe import CPPE

DP16KD_MODEL = r"""
module DP16KD #(
  parameter DATA_WIDTH_A = 18, parameter DATA_WIDTH_B = 18,
  parameter REGMODE_A = "NOREG", parameter REGMODE_B = "NOREG",
  parameter RESETMODE = "SYNC", parameter ASYNC_RESET_RELEASE = "SYNC",
  parameter CSDECODE_A = "0b000", parameter CSDECODE_B = "0b000",
  parameter WRITEMODE_A = "NORMAL", parameter WRITEMODE_B = "NORMAL", parameter GSR = "ENABLED"
) (
  input DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
  input ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0,
  input CEA, OCEA, CLKA, WEA, RSTA, CSA2, CSA1, CSA0,
  output DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
  input DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
  input ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0,
  input CEB, OCEB, CLKB, WEB, RSTB, CSB2, CSB1, CSB0,
  output DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
  // Port A writes, port B reads (the PE's use); both on one clock.
  localparam W = DATA_WIDTH_B;
  localparam LOW = W == 18 ? 4 : W == 9 ? 3 : W == 4 ? 2 : W == 2 ? 1 : 0;
  wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
  wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
  wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
  wire [13:0] wa = ada >> LOW;
  wire [13:0] ra = adb >> LOW;
  reg [W-1:0] mem [0:(16384 >> LOW) - 1];
  reg [W-1:0] latch = 0, out = 0;
  integer i;
  initial for (i = 0; i < (16384 >> LOW); i = i + 1) mem[i] = 0;
  always @(posedge CLKA)
    if (CEA && WEA) begin
      if (W == 18) begin
        if (ADA0) mem[wa][8:0] <= dia[8:0];
        if (ADA1) mem[wa][17:9] <= dia[17:9];
      end else
        mem[wa] <= dia[W-1:0];
    end
  always @(posedge CLKB) begin
    if (RSTB) latch <= 0;
    else if (CEB) latch <= (CEA && WEA && wa == ra) ? {W{1'bx}} : mem[ra];
    if (RSTB) out <= 0;
    else if (OCEB) out <= latch;
  end
  wire [17:0] dob = REGMODE_B == "OUTREG" ? out : latch;
  assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob;
endmodule
"""

TESTBENCH = r"""
module tb;
  reg clk = 0, rst = 1, en = 0, rd_en = 0, wr_en = 0;
  reg [ABITS-1:0] rd_addr = 0, wr_addr = 0, last_wr_addr = 0;
  reg [15:0] wr_data = 0;
  reg last_wr_en = 0;
  wire [15:0] generic_word, ecp5_word;
  integer cycle, mismatches = 0, same_cycle = 0, next_cycle = 0, seed = SEED;
  pe_generic generic(.clk(clk), .rst(rst), .en(en), .rd_en(rd_en), .rd_addr(rd_addr), .wr_en(wr_en),
                     .wr_addr(wr_addr), .wr_data(wr_data), .mem_data(generic_word));
  pe_ecp5 ecp5(.clk(clk), .rst(rst), .en(en), .rd_en(rd_en), .rd_addr(rd_addr), .wr_en(wr_en),
               .wr_addr(wr_addr), .wr_data(wr_data), .mem_data(ecp5_word));
  always #5 clk = ~clk;
  initial begin
    for (cycle = 0; cycle < CYCLES; cycle = cycle + 1) begin
      @(negedge clk);
      // (checked before the new inputs: the words of this cycle)
      if (cycle > 4 && generic_word !== ecp5_word) begin
        mismatches = mismatches + 1;
        if (mismatches <= 5) $display("MISMATCH cycle %0d: simulated %h, DP16KD form %h", cycle, generic_word, ecp5_word);
      end
      rst = cycle < 2;
      en = ($random(seed) & 7) != 0;
      rd_en = ($random(seed) & 3) != 0;
      wr_en = ($random(seed) & 1);
      rd_addr = ($random(seed) & 3) == 0 ? $random(seed) : ($random(seed) & 3);
      wr_addr = ($random(seed) & 3) == 0 ? $random(seed) : ($random(seed) & 3);
      wr_data = $random(seed);
      if (!rst && en && rd_en && wr_en && rd_addr == wr_addr) same_cycle = same_cycle + 1;
      if (!rst && en && rd_en && last_wr_en && rd_addr == last_wr_addr) next_cycle = next_cycle + 1;
      @(posedge clk);
      last_wr_en = wr_en;
      last_wr_addr = wr_addr;
    end
    $display("RESULT mismatches=%0d same_cycle=%0d next_cycle=%0d", mismatches, same_cycle, next_cycle);
    $finish;
  end
endmodule
"""


def _ulx3s():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    return ULX3S_85F_Platform()


def _ports(pe):
    return [pe.en, pe.rd_en, pe.rd_addr, pe.wr_en, pe.wr_addr, pe.wr_data, pe.mem_data]


class BlockRegisteredPE(CPPE):
    """The PE with the SRAM output register in the DP16KD (``REGMODE_B "OUTREG"``)."""
    SRAM_REGISTER_IN_BLOCK = True


@pytest.mark.parametrize("pe_class", [CPPE, BlockRegisteredPE], ids=["fabric_register", "block_register"])
@pytest.mark.parametrize("sram_depth", [32, 2048, 8192])
def test_dp16kd_form_reads_the_simulated_words(tmp_path, sram_depth, pe_class, seed):
    iverilog, vvp = shutil.which("iverilog"), shutil.which("vvp")
    if not (iverilog and vvp):
        pytest.skip("needs Icarus Verilog")
    pe = CPPE(sram_depth=sram_depth)
    generic = verilog.convert(pe, name="pe_generic", emit_src=False)
    pe = pe_class(sram_depth=sram_depth)
    ecp5 = verilog.convert(pe, name="pe_ecp5", emit_src=False, platform=_ulx3s())
    assert "DP16KD" in ecp5 and "DP16KD" not in generic
    abits = (sram_depth - 1).bit_length()
    cycles = 4000
    testbench = TESTBENCH.replace("ABITS", str(abits)).replace("CYCLES", str(cycles)).replace(
        "SEED", str(random.Random(seed).randrange(1, 2 ** 31)))
    for name, text in {"generic.v": generic, "ecp5.v": ecp5, "dp16kd.v": DP16KD_MODEL, "tb.v": testbench}.items():
        (tmp_path / name).write_text(text)
    build = subprocess.run([iverilog, "-g2012", "-o", "sim", "tb.v", "generic.v", "ecp5.v", "dp16kd.v"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run([vvp, "-n", "sim"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    result = [line for line in run.stdout.splitlines() if line.startswith("RESULT")]
    assert result, run.stdout + run.stderr
    fields = dict(item.split("=") for item in result[0].split()[1:])
    assert int(fields["same_cycle"]) > 0 and int(fields["next_cycle"]) > 0, fields
    assert int(fields["mismatches"]) == 0, run.stdout
