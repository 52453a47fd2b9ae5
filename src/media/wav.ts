// RIFF/WAVE files around 16-bit little-endian mono PCM: what the voice providers return as `wav`, what
// speech encodes as `wav`, and the simulator's audio.

/** A RIFF/WAVE file around 16-bit little-endian mono PCM. */
export function pcmToWav(pcm: Buffer, sampleRateHz: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRateHz, 24);
  header.writeUInt32LE(sampleRateHz * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}

/** A RIFF/WAVE file of these 16-bit mono samples. */
export function encodeWav(samples: Int16Array, sampleRateHz: number): Buffer {
  return pcmToWav(Buffer.from(samples.buffer, samples.byteOffset, samples.length * 2), sampleRateHz);
}
