export declare const DESCRIPTOR_SET: string;
export declare const DESCRIBED_FILES: string[];
export declare function buildDescriptorSet(out?: string): void;
